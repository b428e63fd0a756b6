// Package loss is a home's verdict on a node its jobs run on: dead (its
// jobs are lost, or restarted from a checkpoint) or not. The verdict is a
// pure function of what membership says and what the node last pushed to
// the home; the relay gathers both and acts on the verdict (package news).
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
