// Package fence is lease-based self-fencing as two pure decisions, one
// for the node a job runs on and one for the job's home, so that a job
// its home restarts from a checkpoint never runs twice. It does no I/O:
// no clock, no processes, no network (test/layout); each side passes its
// own clock's time in, and the two clocks are never compared.
//
// A job its home could restart (it has a kept checkpoint) holds a lease
// on its node: every push of its news that the home acknowledges renews
// it from the moment the push was sent, by the node's clock. A node that
// has not renewed a job's lease for Lease stops the job's program (Node:
// Stop), and kills it once Kill has passed (Kill); a lease renewed before
// Kill thaws it (Thaw) and the job runs on. The home restarts a job of a
// node it lost only Kill+Margin after it last heard from that node, by
// the home's clock, or after its own start when it has not heard from it
// since (RestartAt). A job with no checkpoint holds no lease: nothing can
// restart it, so it cannot run twice, and it runs on through any cut.
//
// # The invariant
//
// A restarted copy never runs while its original can still run. The home
// hears a push at t_h, after the node sent it at t_s; the node kills the
// job by t_s+Kill+s, where s is how late its agent acts on the lease (a
// stall, its own restart); the home restarts no sooner than
// t_h+Kill+Margin > t_s+Kill+Margin. So the original is dead first
// whenever s < Margin, with the clocks' rates equal to well within
// Margin over Kill (NTP keeps them to parts per million; their offsets
// do not matter). A stall of the node's agent longer than Margin breaks
// it: Margin is the longest stall the fencing covers, and the reason its
// default is as long as a few of memberlist's suspicion timeouts. The
// randomized test (fence_test.go) drives both sides through cuts,
// delays, stalls and agent restarts of either side and checks the
// invariant at every step.
//
// A job that moves carries its lease: "the node" above is the job's
// copies in turn, and t_s the source's last push the home took. The
// source renews it while the job moves (its heartbeats reach the home),
// and its commit says how old it is then; the destination counts from
// that (less the commit's transit, milliseconds, which Margin covers),
// never from the job's arrival, until the home has taken the job's news
// from there, and so kills the moved copy by the time the source would
// have killed it. The home, for its part, counts Kill+Margin from when it
// took the move's note at the latest (the moved copy's lease is no newer:
// the source's pushes it acknowledged came before), or, for a restart,
// from its consent, not from the node's last news, which may be older
// (a node that ran nothing of that home). So never two copies running,
// and never a copy running past its fence: a transfer and restore slower
// than Kill cost nothing while the source reaches the home, and a move
// into a cut costs the copy, not a second one.
package fence

import (
	"fmt"
	"time"
)

// The defaults (docs/deploy.md, "Fencing"): a job is restarted within
// DefaultKill+DefaultMargin of its node's last news, and the home's sweep
// (every 5 s) and the restart itself come on top: within 60 s of losing
// its node in all.
const (
	// DefaultLease is longer than an agent's restart (an upgrade of the
	// home's agent takes a few seconds), so that one fences nothing, and
	// four heartbeats of a quiet job (AliveEvery, 5 s).
	DefaultLease = 20 * time.Second
	// DefaultKill leaves a frozen job Lease more to be thawed: a link
	// that flaps for half a minute costs a pause, not the job.
	DefaultKill = 40 * time.Second
	// DefaultMargin is the longest stall of a node's agent the fencing
	// covers (see the invariant), and covers the clocks' drift.
	DefaultMargin = 10 * time.Second
	// MaxTotal bounds Kill+Margin: a home that waits longer leaves a
	// lost job lost for too long to be worth fencing.
	MaxTotal = 10 * time.Minute
	// MinLease is the least lease: a job's lease is renewed every
	// quarter of it (HeartbeatEvery), which a push must be able to do.
	MinLease = time.Second
)

// Config is the fencing's three durations (config keys fence.lease,
// fence.kill, fence.margin).
type Config struct {
	// Lease is how long a node runs a job it could not tell its home
	// about before it stops it.
	Lease time.Duration `yaml:"lease"`
	// Kill is how long before it kills it.
	Kill time.Duration `yaml:"kill"`
	// Margin is what a home waits past Kill before it restarts a job of
	// a node it lost: the longest stall of that node's agent covered.
	Margin time.Duration `yaml:"margin"`
}

// DefaultConfig is the fencing of a cluster that sets nothing.
func DefaultConfig() Config {
	return Config{Lease: DefaultLease, Kill: DefaultKill, Margin: DefaultMargin}
}

// Validate refuses durations that could not keep the invariant, and
// names the key of the first wrong one (as the config's other sections).
func (c Config) Validate() (string, error) {
	switch {
	case c.Lease < MinLease:
		return "fence.lease", fmt.Errorf("%v is below the least, %v", c.Lease, MinLease)
	case c.Kill <= c.Lease:
		return "fence.kill", fmt.Errorf("%v must be longer than fence.lease (%v)", c.Kill, c.Lease)
	case c.Margin <= 0:
		return "fence.margin", fmt.Errorf("%v must be positive: it is the longest stall of an agent the fencing covers", c.Margin)
	case c.Kill+c.Margin > MaxTotal:
		return "fence.kill", fmt.Errorf("%v with fence.margin %v is over %v: a lost job would wait that long for its restart", c.Kill, c.Margin, MaxTotal)
	}
	return "", nil
}

// HeartbeatEvery is how often a node pushes news of a fenced job that
// has nothing to say, at most: four renewals a lease, so that a quiet
// job is not stopped for one lost push.
func (c Config) HeartbeatEvery() time.Duration { return c.Lease / 4 }

// RestartAt is the earliest time, by the home's clock, at which a home
// may restart a job of a node it has lost: Kill+Margin after it last
// heard from the node (heard, zero if never), or after the home started
// (started) when that is later: a home that restarted knows nothing of
// what it heard before. theirs is the node's own Kill, as it said it (0:
// unknown): the home waits for the longer of the two, so that a node
// configured apart from it is not restarted from before it kills.
func (c Config) RestartAt(heard, started time.Time, theirs time.Duration) time.Time {
	if heard.Before(started) {
		heard = started
	}
	return heard.Add(max(c.Kill, theirs) + c.Margin)
}

// MayRestart says whether a home may restart, at now, a job of a node it
// last heard from at heard, whose own Kill is theirs (RestartAt).
func (c Config) MayRestart(heard, started, now time.Time, theirs time.Duration) bool {
	return !now.Before(c.RestartAt(heard, started, theirs))
}
