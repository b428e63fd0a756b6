package fencing

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"roam/internal/fence"
	"roam/internal/job"
)

// procs records what the leases did to the processes; pid 2 was stopped
// by its user.
type procs struct {
	job.Processes
	did []string
}

func (p *procs) Alive(int, uint64) bool    { return true }
func (p *procs) StartTicks(pid int) uint64 { return job.StartTicks(pid) }
func (p *procs) Stopped(pid int) bool      { return pid == 2 }
func (p *procs) Signal(pid int, sig syscall.Signal) error {
	p.did = append(p.did, map[syscall.Signal]string{syscall.SIGSTOP: "stop", syscall.SIGCONT: "cont"}[sig]+string(rune('0'+pid)))
	return nil
}
func (p *procs) Kill(pid int, _ uint64, _ time.Duration) {
	p.did = append(p.did, "kill"+string(rune('0'+pid)))
}

var cfg = fence.Config{Lease: 4 * time.Second, Kill: 8 * time.Second, Margin: 2 * time.Second}

// A fenced job is stopped at the lease, again if it was continued, and
// thawed when its home answers;
// one its user had stopped stays stopped; one without a checkpoint is
// left alone; past the kill, the fenced ones are killed, and say so.
func TestLeasesStopThawKill(t *testing.T) {
	p := &procs{}
	l := New(cfg, p, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	t0 := time.Unix(1000, 0)
	l.Reached("h", t0)
	l.Running([]Job{{ID: "a", Home: "h", PID: 1, Fenced: true}, {ID: "b", Home: "h", PID: 2, Fenced: true}, {ID: "c", Home: "h", PID: 3}},
		func(string) bool { return false }, t0)
	l.Step(t0.Add(cfg.Lease - time.Millisecond))
	l.Step(t0.Add(cfg.Lease))
	l.Step(t0.Add(cfg.Lease + time.Second)) // a is running again (Stopped says so): stopped again
	l.Reached("h", t0.Add(cfg.Lease))
	l.Step(t0.Add(cfg.Lease + time.Second))
	l.Step(t0.Add(cfg.Lease + cfg.Kill))
	want := []string{"stop1", "stop1", "cont1", "kill1", "kill2"}
	got := slices.Clone(p.did)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("did %v, want %v (b stopped by its user: not stopped again, not thawed)", p.did, want)
	}
	if !l.Killed("a") || !l.Killed("b") || l.Killed("c") {
		t.Fatal("Killed does not name the jobs the fence killed")
	}
	// Gone from the node: forgotten.
	l.Running(nil, func(string) bool { return false }, t0)
	if l.Killed("a") || len(l.jobs) != 0 {
		t.Fatal("a job gone from the node is still held")
	}
}

// The homes' reach outlives the agent: a job the next agent finds takes
// its lease from the file, not from the agent's start; a home the node
// never reached starts the lease when the job is first seen.
func TestLeasesKeepTheReach(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t0 := time.Unix(1000, 0)
	l := New(cfg, &procs{}, log, path)
	l.Reached("h", t0)
	l.Step(t0) // writes it
	p := &procs{}
	l = New(cfg, p, log, path)
	later := t0.Add(cfg.Kill + time.Second)
	l.Running([]Job{{ID: "a", Home: "h", PID: 1, Fenced: true}, {ID: "b", Home: "new", PID: 3, Fenced: true}}, func(string) bool { return false }, later)
	l.Step(later)
	if !slices.Equal(p.did, []string{"kill1"}) {
		t.Fatalf("did %v after a restart past the kill: want kill1 alone", p.did)
	}
}

// A job that comes to a node (a migration in, a restart here) after the
// node last reached its home long ago holds its lease from when it came:
// the old reach stopped it or killed it as it came, also when it was the
// first job an agent restarted since saw. One the agent found at its
// start (its roam-init older than the agent) still takes the reach.
func TestLeasesOfAJobThatCame(t *testing.T) {
	p := &procs{}
	l := New(cfg, p, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	l.startTix = 1000
	t0 := time.Unix(1000, 0)
	l.Reached("h", t0)
	came := t0.Add(cfg.Kill + time.Second)
	l.Running([]Job{{ID: "old", Home: "h", PID: 1, Tix: 500, Fenced: true}, {ID: "new", Home: "h", PID: 3, Tix: 2000, Fenced: true}}, func(string) bool { return false }, came)
	l.Step(came.Add(StepEvery))
	if !slices.Equal(p.did, []string{"kill1"}) {
		t.Fatalf("did %v as a job came long after the home's last reach: want kill1 alone (the job found at the start)", p.did)
	}
	l.Step(came.Add(cfg.Lease))
	if !slices.Equal(p.did, []string{"kill1", "stop3"}) {
		t.Fatalf("did %v a lease after the job came: want it stopped then", p.did)
	}
	l.Reached("h", came.Add(cfg.Lease))
	l.Step(came.Add(cfg.Lease + StepEvery))
	if !slices.Equal(p.did, []string{"kill1", "stop3", "cont3"}) {
		t.Fatalf("did %v once the home was reached again: want it thawed", p.did)
	}
}

// A job that left the node and comes back as a new copy (another start)
// while its old entry is still held (the push loop of a node with no job
// left sleeps, so nothing told the leases it went) takes a lease from
// its coming, not the entry its old copy left: that one, counted from a
// reach of its home long past, killed a job its home had just restarted
// on the node (the harness's TestAgentsRestartWaitsForTheKeeper).
func TestLeasesOfACopyThatCameBack(t *testing.T) {
	p := &procs{}
	l := New(cfg, p, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	l.startTix = 1000
	t0 := time.Unix(1000, 0)
	l.Reached("h", t0)
	l.Running([]Job{{ID: "a", Home: "h", PID: 1, Tix: 2000, Fenced: true}}, func(string) bool { return false }, t0)
	back := t0.Add(cfg.Kill + cfg.Margin)
	l.Running([]Job{{ID: "a", Home: "h", PID: 4, Tix: 3000, Fenced: true}}, func(string) bool { return false }, back)
	l.Step(back.Add(StepEvery))
	if len(p.did) != 0 {
		t.Fatalf("did %v as the new copy came: want nothing until its own lease ends", p.did)
	}
	l.Step(back.Add(cfg.Lease))
	if !slices.Equal(p.did, []string{"stop4"}) {
		t.Fatalf("did %v a lease after the new copy came: want it stopped then", p.did)
	}
}

// Holding names the jobs the fence holds stopped, and not one its user
// stopped, nor one thawed again.
func TestLeasesHolding(t *testing.T) {
	l := New(cfg, &procs{}, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	t0 := time.Unix(1000, 0)
	l.Reached("h", t0)
	l.Running([]Job{{ID: "a", Home: "h", PID: 1, Fenced: true}, {ID: "b", Home: "h", PID: 2, Fenced: true}}, func(string) bool { return false }, t0)
	if l.Holding("a") {
		t.Fatal("held before its lease")
	}
	l.Step(t0.Add(cfg.Lease))
	if !l.Holding("a") || l.Holding("b") || l.Holding("c") {
		t.Fatalf("past the lease: a held %v (want true), b (stopped by its user) %v, c (unknown) %v", l.Holding("a"), l.Holding("b"), l.Holding("c"))
	}
	l.Reached("h", t0.Add(cfg.Lease))
	l.Step(t0.Add(cfg.Lease + StepEvery))
	if l.Holding("a") {
		t.Fatal("held once its home was reached again")
	}
}

// The jobs the fence killed are kept in a file as they are killed: a
// restarted agent still tells their homes that its fence killed them
// (which restart them), until they are gone from the node.
func TestLeasesKeepTheKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := New(cfg, &procs{}, log, path)
	t0 := time.Unix(1000, 0)
	l.Reached("h", t0)
	l.Running([]Job{{ID: "a", Home: "h", PID: 1, Fenced: true}, {ID: "b", Home: "h", PID: 3}}, func(string) bool { return true }, t0)
	l.Step(t0.Add(cfg.Kill))
	if again := New(cfg, &procs{}, log, path); !again.Killed("a") || again.Killed("b") {
		t.Fatalf("after a restart: a killed %v, b killed %v; want a only", again.Killed("a"), again.Killed("b"))
	}
	l.Running(nil, func(string) bool { return false }, t0.Add(cfg.Kill+time.Second)) // a's end reached its home
	if again := New(cfg, &procs{}, log, path); again.Killed("a") {
		t.Fatal("a job gone from the node is still kept as killed")
	}
}

// stopProcs keeps each process's stop as the kernel would.
type stopProcs struct {
	job.Processes
	stopped map[int]bool
	did     []string
}

func (p *stopProcs) Alive(int, uint64) bool    { return true }
func (p *stopProcs) StartTicks(pid int) uint64 { return job.StartTicks(pid) }
func (p *stopProcs) Stopped(pid int) bool      { return p.stopped[pid] }
func (p *stopProcs) Signal(pid int, sig syscall.Signal) error {
	p.stopped[pid] = sig == syscall.SIGSTOP
	p.did = append(p.did, map[syscall.Signal]string{syscall.SIGSTOP: "stop", syscall.SIGCONT: "cont"}[sig])
	return nil
}

// A thaw that comes while CRIU dumps the job is put off, not dropped: the
// first step after the dump continues the job (the chaos run found a job
// its home reached again stopped for good, its periodic checkpoints
// taken of it stopped). A put-off thaw's job that its lease stops again
// is the fence's stopped job, not its user's: the next thaw continues it.
func TestLeasesThawPutOffByADump(t *testing.T) {
	for _, again := range []bool{false, true} {
		p := &stopProcs{stopped: map[int]bool{}}
		l := New(cfg, p, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
		dumping := false
		l.Dumping = func(string) bool { return dumping }
		t0 := time.Unix(1000, 0)
		l.Reached("h", t0)
		l.Running([]Job{{ID: "a", Home: "h", PID: 1, Fenced: true}}, func(string) bool { return false }, t0)
		l.Step(t0.Add(cfg.Lease))
		dumping = true
		at := t0.Add(cfg.Lease + time.Second)
		l.Reached("h", at)
		l.Step(at)
		l.Step(at.Add(fenceStep))
		if !p.stopped[1] || len(p.did) != 1 {
			t.Fatalf("during the dump: did %v, stopped %v; want the thaw put off", p.did, p.stopped[1])
		}
		dumping = false
		if again {
			at = at.Add(cfg.Lease) // cut off again before a step after the dump
			l.Step(at)
			l.Reached("h", at)
		}
		l.Step(at.Add(2 * fenceStep))
		l.Step(at.Add(3 * fenceStep))
		if p.stopped[1] || !slices.Equal(p.did, []string{"stop", "cont"}) {
			t.Fatalf("stopped again %v: after the dump did %v, stopped %v; want it continued once", again, p.did, p.stopped[1])
		}
	}
}

const fenceStep = 200 * time.Millisecond
