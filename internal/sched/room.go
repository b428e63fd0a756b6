package sched

// Room for memory: a node takes a job (a start, a move, a restart) only
// while the memory requests (roam run --mem) of the jobs it holds and
// has agreed to take, and this one's, fit in what it gives its jobs
// (jobs.memory_bytes). Memory is admitted, never overcommitted: a job
// past its node's memory meets the OOM killer, and the job it kills is
// whichever is largest, not the newcomer's. CPU is shared, and the
// policies balance it. These rules are the same for placement, for a
// policy's move and its destination's admission, and for the node that
// takes a job, which judges it again against what it holds now.

import (
	"errors"
	"fmt"

	"roam/internal/errkind"
	"roam/internal/resources"
)

// ErrNoRoom: no node has room for a process's memory request now; some
// would, once jobs end or leave.
var ErrNoRoom = errors.New("no room for the memory request")

// ErrTooLarge: a process's memory request is larger than what any node
// gives its jobs: it would never fit.
var ErrTooLarge = errors.New("memory request larger than any node's")

// memEpsilon absorbs the rounding of MiB as floats.
const memEpsilon = 1.0 / (1 << 10)

// MemFits says why a node (id) that gives its jobs jobsMB MiB and holds
// heldMB of requests cannot take a job asking req; nil when it can, or
// when it counts no memory (jobsMB 0) or the job asks none. The node
// that takes a job calls it with what it holds now.
func MemFits(id string, jobsMB, heldMB float64, req resources.Request) error {
	need := req.MemMB()
	switch {
	case jobsMB <= 0 || need <= 0 || heldMB+need <= jobsMB+memEpsilon:
		return nil
	case need > jobsMB+memEpsilon:
		return errkind.New(ErrTooLarge, "--mem %s is more than node %s gives its jobs (%s, jobs.memory_bytes)",
			resources.FormatMem(req.MemBytes), id, mib(jobsMB))
	}
	return errkind.New(ErrNoRoom, "--mem %s does not fit on node %s now: its jobs hold %s of the %s it gives them",
		resources.FormatMem(req.MemBytes), id, mib(heldMB), mib(jobsMB))
}

// hasRoom says whether node x has room now for a process of req.
func hasRoom(x NodeLoad, req resources.Request) bool {
	return MemFits(x.ID, x.MemJobsMB, x.MemHeldMB, req) == nil
}

// FitsNowhere says why a process of request req fits on none of nodes
// (the live ones, draining ones left out by the caller or here): on
// none now (ErrNoRoom: room may come as jobs end or leave), or on none
// ever (ErrTooLarge: larger than any node gives its jobs). nil: some
// node has room for it now. A node whose memory is not known (MemJobsMB
// 0, an older roam's or one not heard from) counts as having room: it
// judges the job itself when asked to take it.
func FitsNowhere(nodes []NodeLoad, req resources.Request) error {
	return noRoom(usable(nodes), req, 1, 1)
}

// noRoom is FitsNowhere's error for left of a run's n processes that
// found no node (nil when one of ns has room): ErrTooLarge when even an
// empty node would not take one, else ErrNoRoom with the node of most
// room named.
func noRoom(ns []NodeLoad, req resources.Request, left, n int) error {
	if len(ns) == 0 {
		return ErrNoNode
	}
	var most *NodeLoad
	biggest := 0.0
	for i := range ns {
		x := &ns[i]
		if x.Draining {
			continue
		}
		if hasRoom(*x, req) {
			return nil
		}
		biggest = max(biggest, x.MemJobsMB)
		if most == nil || x.MemJobsMB-x.MemHeldMB > most.MemJobsMB-most.MemHeldMB {
			most = x
		}
	}
	if most == nil {
		return ErrNoNode
	}
	what := "a process"
	if n > 1 {
		what = fmt.Sprintf("%d of the %d processes", left, n)
	}
	if req.MemMB() > biggest+memEpsilon {
		return errkind.New(ErrTooLarge, "--mem %s is more than any node gives its jobs (the most: %s, jobs.memory_bytes)",
			resources.FormatMem(req.MemBytes), mib(biggest))
	}
	return errkind.New(ErrNoRoom, "no node has room for %s of --mem %s now (the most room: node %s, %s free of the %s it gives its jobs)",
		what, resources.FormatMem(req.MemBytes), most.ID, mib(max(most.MemJobsMB-most.MemHeldMB, 0)), mib(most.MemJobsMB))
}

// mib writes a number of MiB for people.
func mib(mb float64) string { return fmt.Sprintf("%.0f MiB", mb) }
