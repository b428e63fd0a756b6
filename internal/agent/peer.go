package agent

// Members' peer addresses, for the peer client (package peer), and the
// calls made to every live member at once.

import (
	"sync"
	"time"
)

// fanOutWait bounds the wait for one node's answer to a fan-out (its part
// of `roam ps`, its events, its policy).
const fanOutWait = 3 * time.Second

// fanOut makes the same peer call to every live node, this one included,
// and returns the answers in node order: a node that does not answer
// within fanOutWait is left out, not waited for.
func fanOut[T any](a *Agent, method, path string, in any) []T {
	nodes := a.members.Live()
	out := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		wg.Go(func() {
			var v T
			if err := a.peers.CallWithin(fanOutWait, id, method, path, in, &v); err != nil {
				a.log.Debug("fan out", "node", id, "path", path, "err", err)
				return
			}
			out[i] = &v
		})
	}
	wg.Wait()
	var res []T
	for _, v := range out {
		if v != nil {
			res = append(res, *v)
		}
	}
	return res
}
