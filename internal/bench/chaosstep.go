package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"roam/internal/api"
)

// The chaos run's steps that are not faults: migrations and
// checkpoint/restart cycles.

// migrate moves job j to node to, asked at its home as root; the counts
// are the caller's (a migration may run beside a fault).
func (x *chaos) migrate(j *chaosJob, to string, lazy bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var m api.Migration
	return x.root[x.node(j.home)].Do(ctx, http.MethodPost, api.PathMigrate, api.MigrateRequest{ID: j.id, Node: to, Lazy: lazy}, &m)
}

// count adds a migration's outcome to the counts.
func (x *chaos) count(err error) {
	if err == nil {
		x.res.Migrations++
		return
	}
	x.res.MigrationsFailed++
	fmt.Fprintf(x.progress, "chaos: migration failed: %v\n", err)
}

// stepMigrate migrates a running job to another node, lazily one time in
// four.
func (x *chaos) stepMigrate() error {
	j := x.pickJob()
	if j == nil {
		x.note("migrate: no job running")
		return nil
	}
	to, lazy := x.otherNode(j.rec.Node), x.rng.IntN(4) == 0
	x.note("migrate %s %s→%s lazy=%v", j.id, j.rec.Node, to, lazy)
	x.count(x.migrate(j, to, lazy))
	return nil
}

// checkpointOf saves job j into a buffer, asked as its user at its home.
func (x *chaos) checkpointOf(j *chaosJob, stop bool, w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := x.user[x.node(j.home)].Fetch(ctx, api.PathCheckpoint, api.CheckpointRequest{ID: j.id, Stop: stop}, w)
	return err
}

// stepCycle is a checkpoint/restart cycle, as a user does it: roam
// checkpoint (with --stop, or without and then, a moment later, roam kill
// -s KILL: the file's numbers fall back once at the restart), and roam
// restart of the file on a node drawn at random. A job that was saved and
// ended is restarted or the run stops: it would be lost.
func (x *chaos) stepCycle() error {
	j := x.pickJob()
	if j == nil {
		x.note("checkpoint/restart: no job running")
		return nil
	}
	stop, runOn := x.rng.IntN(2) == 0, time.Duration(x.rng.IntN(4))*300*time.Millisecond
	x.note("checkpoint/restart %s on %s stop=%v", j.id, j.rec.Node, stop)
	if err := x.saveOwner(j, stop); err != nil {
		fmt.Fprintf(x.progress, "chaos: checkpoint of %s failed: %v\n", j.id, err)
		return nil
	}
	if !stop {
		time.Sleep(runOn) // it runs on past its checkpoint, for the fall
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := x.user[x.node(j.home)].Do(ctx, http.MethodPost, api.PathKill, api.KillRequest{IDs: []string{j.id}, Signal: 9}, nil)
		cancel()
		if err != nil {
			return x.violation("roam kill -s KILL %s: %v", j.id, err)
		}
	}
	rec, err := x.waitEnded(j)
	if err != nil {
		return err
	}
	if rec.ExitCode != nil && *rec.ExitCode == 0 {
		return nil // it had counted to its end before the kill
	}
	var why []string
	for try := 0; try < 5; try++ {
		on := x.st.Nodes[x.rng.IntN(len(x.st.Nodes))].ID
		err := x.restartOwner(j, on)
		if err == nil {
			x.res.Cycles++
			return nil
		}
		why = append(why, fmt.Sprintf("on %s: %v", on, err))
	}
	x.res.Lost++
	return x.violation("job %s saved and ended, and not restarted: %v", j.id, why)
}

// waitEnded waits until job j's home records it ended.
func (x *chaos) waitEnded(j *chaosJob) (api.Job, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var js []api.Job
		if err := x.root[x.node(j.home)].Get(api.PathPS+"?all=1", &js); err == nil {
			for _, r := range js {
				if r.ID == j.id && r.State == api.StateFinished {
					return r, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return api.Job{}, x.violation("job %s not ended a minute after its checkpoint and kill", j.id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
