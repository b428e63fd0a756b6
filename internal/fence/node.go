package fence

import "time"

// State is where a job running on a node stands with its lease.
type State int

const (
	// Running: its lease is current, or it holds none.
	Running State = iota
	// Stopped: the node stopped its program, its lease past Lease.
	Stopped
	// Killed: the node killed it, its lease past Kill. Final.
	Killed
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	case Killed:
		return "killed"
	}
	return "unknown"
}

// Do is what the node's agent carries out for a job.
type Do int

const (
	None Do = iota
	// Stop stops the job's program (it can still be thawed).
	Stop
	// Thaw continues the program Stop stopped.
	Thaw
	// Kill kills the job's whole tree: it may be restarted elsewhere.
	Kill
)

func (d Do) String() string {
	switch d {
	case None:
		return "none"
	case Stop:
		return "stop"
	case Thaw:
		return "thaw"
	case Kill:
		return "kill"
	}
	return "unknown"
}

// Lease is a job's lease on the node it runs on.
type Lease struct {
	// Fenced: its home could restart it (it has, or will have, a kept
	// checkpoint). A job without holds no lease and is never stopped.
	Fenced bool
	// Renewed is when the node sent the last push of its news its home
	// acknowledged, by the node's clock; for a job that came here and has
	// not been acknowledged yet, when it came.
	Renewed time.Time
	State   State
}

// Step is the node's decision on a job's lease at now, by the node's
// clock: the lease's next state and what to do. It is called however
// late the agent gets to it: a lease found past Kill is killed at once,
// wherever it stood.
func (c Config) Step(l Lease, now time.Time) (Lease, Do) {
	if l.State == Killed {
		return l, None
	}
	age := now.Sub(l.Renewed)
	want := Running
	switch {
	case !l.Fenced:
	case age >= c.Kill:
		want = Killed
	case age >= c.Lease:
		want = Stopped
	}
	do := None
	switch {
	case want == l.State:
	case want == Killed:
		do = Kill
	case want == Stopped:
		do = Stop
	default:
		do = Thaw
	}
	l.State = want
	return l, do
}

// Renew renews l with a push sent at sent that the home acknowledged; an
// acknowledgement of an older push than the one l holds changes nothing.
func Renew(l Lease, sent time.Time) Lease {
	if sent.After(l.Renewed) {
		l.Renewed = sent
	}
	return l
}
