// Package execlock starts a child under the process's exec lock
// (ckpt.CRIU.ExecMu). Everyone in roamd who starts a child holds it while
// the child starts: a descriptor made inheritable for one child (CRIU's
// end of a worker's socket, the files a restore hands CRIU) must reach
// that child alone, and a child started by another goroutine meanwhile
// would inherit it too.
package execlock

import (
	"os/exec"
	"sync"
)

// Start starts cmd holding mu, if not nil, only while it starts.
func Start(cmd *exec.Cmd, mu *sync.Mutex) error {
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	return cmd.Start()
}
