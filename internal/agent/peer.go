package agent

// Members' peer addresses, for the peer client (package peer), and the
// calls made to every live member at once.

import (
	"sort"
	"sync"

	"roam/internal/agent/peer"
	"roam/internal/sched"
)

func (a *Agent) peerAddrOf(node string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.known[node]; p != nil {
		return p.peerAddr
	}
	return ""
}

// peerAddr is a member's peer address, or an error naming the node.
func (a *Agent) peerAddr(node string) (string, error) {
	if addr := a.peerAddrOf(node); addr != "" {
		return addr, nil
	}
	return "", peer.Unavailable(node)
}

// fanOut makes the same peer call to every live node, this one included,
// and returns the answers in node order: a node that does not answer
// within psTimeout is left out, not waited for.
func fanOut[T any](a *Agent, method, path string, in any) []T {
	a.mu.Lock()
	var nodes []string
	for id, p := range a.known {
		if p.alive {
			nodes = append(nodes, id)
		}
	}
	a.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool { return sched.IDLess(nodes[i], nodes[j]) })
	out := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		wg.Go(func() {
			var v T
			if err := a.peers.CallWithin(psTimeout, id, method, path, in, &v); err != nil {
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
