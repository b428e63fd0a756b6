package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// lazyPipeSize is the pipe size CRIU's lazy page server asks for.
const lazyPipeSize = 8 << 20

// migrationSupport finds out, at start, what migration can do on this
// host, so that a limit shows in the log and in `roam stats` instead of at
// the first migration:
//   - CRIU answers over RPC, and which version;
//   - whether root holds CAP_SYS_RESOURCE: without it, root's CRIU cannot
//     read a non-root process's rlimits, so only root-owned jobs migrate;
//   - lazy migration: CRIU's page server needs pipes of lazyPipeSize, which
//     without CAP_SYS_RESOURCE the kernel allows only up to
//     fs.pipe-max-size, so the agent raises that sysctl.
func (a *Agent) migrationSupport() string {
	v, err := a.criu.Version()
	if err != nil {
		return fmt.Sprintf("no migration: criu at %s does not answer: %v", a.criu.Path, err)
	}
	ver := fmt.Sprintf("criu %d.%d.%d", v/10000, v/100%100, v%100)
	if v < 40200 {
		ver += " (older than 4.2: jobs with inet sockets fail to dump on kernels >= 6.16)"
	}
	if hasCapSysResource() {
		a.allUsers = true
		return ver + "; jobs of every user migrate; lazy migration on"
	}
	lazy := "lazy migration on"
	if cur := pipeMaxSize(); cur < lazyPipeSize {
		if err := os.WriteFile("/proc/sys/fs/pipe-max-size", []byte(strconv.Itoa(lazyPipeSize)), 0o644); err != nil {
			lazy = fmt.Sprintf("lazy migration off (fs.pipe-max-size is %d and cannot be raised: %v)", cur, err)
		} else {
			lazy = fmt.Sprintf("lazy migration on (raised fs.pipe-max-size from %d to %d)", cur, lazyPipeSize)
		}
	}
	return ver + "; root lacks CAP_SYS_RESOURCE, so only root-owned jobs migrate here; " + lazy
}

// hasCapSysResource reads CapEff of this process (bit 24).
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && c&(1<<24) != 0
		}
	}
	return false
}

func pipeMaxSize() int {
	b, _ := os.ReadFile("/proc/sys/fs/pipe-max-size")
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
