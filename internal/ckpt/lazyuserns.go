package ckpt

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// userfaultfdDev is the kernel's userfaultfd device (Linux 6.1).
const userfaultfdDev = "/dev/userfaultfd"

// LazyInUserNS says whether the CRIU at criuPath can restore a job lazily
// inside the job's own user namespace, and if not, why. The restored tasks
// make their userfaultfd themselves, as root of that namespace, without
// CAP_SYS_PTRACE in the host's: userfaultfd(2) refuses them unless
// vm.unprivileged_userfaultfd is 1 (0 by default on most distributions), so
// CRIU must fall back to /dev/userfaultfd, guarded by its file mode instead
// (scripts/criu-patches/0001; the CRIU that scripts/install-criu.sh builds).
// A CRIU without that fallback names the device nowhere in its binary.
func LazyInUserNS(criuPath string) (bool, error) {
	if b, err := os.ReadFile("/proc/sys/vm/unprivileged_userfaultfd"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return true, nil
	}
	fi, err := os.Stat(userfaultfdDev)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false, fmt.Errorf("vm.unprivileged_userfaultfd is 0 and this kernel has no %s (Linux 6.1)", userfaultfdDev)
	}
	bin, err := os.ReadFile(criuPath)
	if err != nil {
		return false, fmt.Errorf("vm.unprivileged_userfaultfd is 0 and whether criu can use %s is unknown: %w", userfaultfdDev, err)
	}
	if !bytes.Contains(bin, []byte(userfaultfdDev)) {
		return false, fmt.Errorf("vm.unprivileged_userfaultfd is 0 and criu at %s cannot use %s (scripts/install-criu.sh builds one that can)", criuPath, userfaultfdDev)
	}
	return true, nil
}
