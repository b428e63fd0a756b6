package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"roam/internal/api"
)

// The owner of the chaos run's jobs, as a user plays it: every checkpoint
// the run takes of a job (roam checkpoint, as uid 70001) is the owner's
// file, kept. A job whose only checkpoint is such a file (no periodic
// checkpoint kept since it was taken or since the job's last roam
// restart) holds a lease on its node all the same, and its fence kills
// it (137) when its node cannot reach its home for fence.kill; its home
// has nothing to restart it from and says so (api.EndFenced), or marks it
// lost with its node. Its owner then runs roam restart FILE, and the job
// runs on as a new incarnation: restarted, not lost.

// ownerFile is the newest checkpoint file of a job the run (its owner)
// holds, and where its count stood: the file of numbers read last just
// before the checkpoint was asked for (lo) and just after it was taken
// (hi). The copy a restart of it runs writes, first, the number after the
// one the file ended with at the dump: lo+1 to hi+1.
type ownerFile struct {
	img    []byte
	lo, hi int
}

// RestartPoint is where the numbers of a job's file may fall back to at
// one of its restarts, in the order of its record: anywhere (a home's
// restart from a periodic checkpoint, whose count the run does not
// know), or, for a roam restart of its owner's file, lo+1 to hi+1.
type RestartPoint struct {
	Owner  bool
	Lo, Hi int
}

// ownerMove is what a job's owner does about it, by its record at its
// home (ownerDecision).
type ownerMove int

const (
	// ownerNone: nothing; it runs, or ends as it should, or may come back.
	ownerNone ownerMove = iota
	// ownerRestart: nothing but its owner's file brings it back: roam
	// restart FILE (its home refuses while the node it was lost with may
	// still run it, and the owner tries again).
	ownerRestart
	// ownerLost: as ownerRestart, but the run holds no file of it.
	ownerLost
)

// ownerDecision is the owner's move on job r, holding a file of it or
// not: a job its fence killed that its home could not restart (finished,
// 137, api.EndFenced), or that died of a dump that failed (CRIU killed
// mid-dump: api.EndDumpFailed), or one lost with its node that its fence kills
// there and its home cannot restart (fencedUnkept), is restarted from
// the owner's file. A lost job whose fence does not hold it may come back
// when its node does: its owner waits.
func ownerDecision(r api.Job, haveFile bool) ownerMove {
	killed := r.State == api.StateFinished && r.ExitCode != nil && *r.ExitCode >= 128 && (r.EndReason == api.EndFenced || r.EndReason == api.EndDumpFailed)
	lost := r.State == api.StateLost && fencedUnkept(r)
	switch {
	case !killed && !lost:
		return ownerNone
	case haveFile:
		return ownerRestart
	case killed:
		return ownerLost
	}
	return ownerNone
}

// fencedUnkept says whether job r is fenced on its node, and its home
// keeps no checkpoint to restart it from: a checkpoint of it was taken
// (its owner's file, or one kept) or it was restarted from its owner's
// file, which gives it a lease wherever it moves (job.Local.Checkpointed),
// and no periodic checkpoint was kept since its last such restart (the
// job ended before it, and its home dropped what was kept). Its fence
// kills such a job rather than its home restart it, as designed: only
// its owner's file brings it back.
func fencedUnkept(r api.Job) bool {
	var since time.Time
	fenced, kept := false, false
	for _, rs := range r.Restarts {
		if strings.HasPrefix(rs.Why, "roam restart") {
			since, fenced = rs.At, true
		}
	}
	for _, c := range r.Checkpoints {
		fenced = fenced || c.OK
		kept = kept || c.OK && c.StoredOn != "" && c.At.After(since)
	}
	return fenced && !kept
}

// restartPoints are job j's restart points, in its record's order: its
// record's roam restarts are the run's own, of the owner's files whose
// points j.points keeps in turn.
func (j *chaosJob) restartPoints() []RestartPoint {
	var out []RestartPoint
	k := 0
	for _, rs := range j.rec.Restarts {
		p := RestartPoint{}
		if strings.HasPrefix(rs.Why, "roam restart") && k < len(j.points) {
			p = j.points[k]
			k++
		}
		out = append(out, p)
	}
	return out
}

// lastNumber is the last whole number of job j's file now (0: none).
func (j *chaosJob) lastNumber() int {
	b, _ := os.ReadFile(j.file)
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return 0
	}
	n := 0
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	fmt.Sscanf(s, "%d", &n)
	return n
}

// saveOwner checkpoints job j as its user does (roam checkpoint, with
// --stop or not), and keeps the file as the owner's newest.
func (x *chaos) saveOwner(j *chaosJob, stop bool) error {
	lo := j.lastNumber()
	var img bytes.Buffer
	if err := x.checkpointOf(j, stop, &img); err != nil {
		return err
	}
	j.owner = &ownerFile{img: img.Bytes(), lo: lo, hi: j.lastNumber()}
	return nil
}

// restartOwner runs roam restart of job j's owner's file, as its user, at
// its home, on node on ("" the home's choice). A restart done is one more
// in its record, whose point is noted.
func (x *chaos) restartOwner(j *chaosJob, on string) error {
	f := j.owner
	q := ""
	if on != "" {
		q = "?on=" + url.QueryEscape(on)
	}
	var res api.RestartResponse
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := x.user[x.node(j.home)].Upload(ctx, api.PathRestart+q, bytes.NewReader(f.img), int64(len(f.img)), &res)
	if err == nil {
		j.points = append(j.points, RestartPoint{Owner: true, Lo: f.lo + 1, Hi: f.hi + 1})
	}
	return err
}

// ownerRestartEvery is how often the owner tries a roam restart its
// home refused (the node the job was lost with may still run it).
const ownerRestartEvery = 2 * time.Second

// playOwner does the owner's move on job j, by its record now: why the
// job is not settled, or a violation (lost: no file to restart it from).
func (x *chaos) playOwner(j *chaosJob, move ownerMove) (string, error) {
	r := j.rec
	if move == ownerLost {
		x.res.Lost++
		return "", x.violation("job %s ended by its fence (%s on node %s) with no checkpoint kept and no owner's file: lost", j.id, exitText(r.ExitCode), r.Node)
	}
	if time.Now().Before(j.ownerNext) {
		return fmt.Sprintf("%s %s on %s: its owner restarts it", j.id, r.State, r.Node), nil
	}
	j.ownerNext = time.Now().Add(ownerRestartEvery)
	err := x.restartOwner(j, "")
	fmt.Fprintf(x.progress, "chaos: the owner restarts %s (%s on node %s, exit %s): %v\n", j.id, r.State, r.Node, exitText(r.ExitCode), errText(err))
	if err == nil {
		x.res.OwnerRestarts++
		j.ownerNext = time.Time{}
	}
	return fmt.Sprintf("%s restarted by its owner", j.id), nil
}

// errText is err's text, or "done".
func errText(err error) string {
	if err == nil {
		return "done"
	}
	return err.Error()
}
