// Package loss is a home's verdict on a node its jobs run on: dead (its
// jobs are lost, or restarted from a checkpoint) or not. The verdict is a
// pure function of what membership says and what the node last pushed to
// the home; the relay gathers both and acts on the verdict (package news).
// It also says when a home tries again a restart of such a node's job
// that failed (RetryAfter); package checkpoints does the tries.
package loss

import "time"

// Grace is how long after its start an agent waits before it takes a
// node it has not heard of for dead: membership needs a few rounds to list
// every live node (twice memberlist's failure detection, about 5 s here).
const Grace = 15 * time.Second

// News is what a home knows of a node some of its jobs run on.
type News struct {
	Listed bool      // membership has heard of it
	Alive  bool      // membership takes it for alive
	Since  time.Time // when membership last changed its mind about it
	Heard  time.Time // its last update to this home; zero if none yet
}

// Dead is a home's verdict on a node its jobs run on. A node that has
// pushed to this home since membership declared it dead, and within
// Grace, is not dead whatever membership says: its updates are the
// stronger evidence (membership takes a few rounds to see a healed link,
// while the node's pushes over the peer port arrive at once; taking it for
// dead again would mark its jobs lost and bring them back at every sweep
// until gossip caught up). Otherwise membership decides; a node it has
// never listed is dead once Grace has passed since the agent started.
func Dead(n News, started, now time.Time) bool {
	if !n.Heard.IsZero() && !n.Heard.Before(n.Since) && now.Sub(n.Heard) < Grace {
		return false
	}
	if !n.Listed {
		return now.Sub(started) > Grace
	}
	return !n.Alive
}

// A home's restart of a job of a lost node from its kept checkpoint can
// fail for a reason of the moment: no live node to restart it on but the
// lost one (a home cut off itself sees none), its checkpoint's keeper
// unreachable, a restore that failed. The home tries again, each wait
// twice the one before, from RetryFirst up to RetryMost, for RetryFor
// after its first try; it stops sooner only when the checkpoint is gone
// (its keeper keeps none, or left the cluster). A node cut off for a
// minute thus has its jobs restarted within RetryMost of its return, and
// a home retries each job about 130 times at most.
const (
	RetryFirst = time.Second
	RetryMost  = 30 * time.Second
	RetryFor   = time.Hour
)

// RetryAfter is how long a home waits after the tries-th failed try (1
// the first) of a restart it began at began, at now, before it tries
// again; false: it gives up (RetryFor has passed).
func RetryAfter(tries int, began, now time.Time) (time.Duration, bool) {
	if now.Sub(began) >= RetryFor {
		return 0, false
	}
	wait := RetryFirst
	for k := 1; k < tries && wait < RetryMost; k++ {
		wait *= 2
	}
	return min(wait, RetryMost), true
}
