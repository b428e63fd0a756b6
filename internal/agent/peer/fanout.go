package peer

import (
	"log/slog"
	"sync"
	"time"
)

// FanOutTimeout bounds the wait for one node's answer to a call made to
// every live node (roam ps, roam policy show, roam events).
const FanOutTimeout = 3 * time.Second

// FanOut makes the same call to every one of nodes at once, and returns
// the answers in the nodes' order: a node that does not answer within
// FanOutTimeout is left out (and logged at debug), not waited for.
func FanOut[T any](c *Client, log *slog.Logger, nodes []string, method, path string, in any) []T {
	out := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		wg.Go(func() {
			var v T
			if err := c.CallWithin(FanOutTimeout, id, method, path, in, &v); err != nil {
				log.Debug("fan out", "node", id, "path", path, "err", err)
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
