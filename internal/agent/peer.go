package agent

// The calls made to every live member at once.

import "roam/internal/agent/peer"

// fanOut makes the same peer call to every live node, this one included,
// and returns the answers in node order (peer.FanOut).
func fanOut[T any](a *Agent, method, path string, in any) []T {
	return peer.FanOut[T](a.peers, a.log, a.members.Live(), method, path, in)
}
