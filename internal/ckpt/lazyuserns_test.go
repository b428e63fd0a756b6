package ckpt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CRIU that can fall back to /dev/userfaultfd restores users' jobs
// lazily; one that cannot does so only where the host lets anyone make a
// userfaultfd. What this host allows decides which answer each must give.
func TestLazyInUserNS(t *testing.T) {
	dir := t.TempDir()
	patched, plain := filepath.Join(dir, "patched"), filepath.Join(dir, "plain")
	os.WriteFile(patched, []byte("\x7fELF...Can't open /dev/userfaultfd: %s\n..."), 0o755)
	os.WriteFile(plain, []byte("\x7fELF...Unable to open an userfaultfd descriptor..."), 0o755)
	sysctl, _ := os.ReadFile("/proc/sys/vm/unprivileged_userfaultfd")
	open := strings.TrimSpace(string(sysctl)) == "1"
	fi, err := os.Stat(userfaultfdDev)
	dev := err == nil && fi.Mode()&os.ModeCharDevice != 0
	for _, c := range []struct {
		bin  string
		want bool
	}{{patched, open || dev}, {plain, open}, {filepath.Join(dir, "missing"), open}} {
		got, why := LazyInUserNS(c.bin)
		if got != c.want {
			t.Errorf("LazyInUserNS(%s) = %v (%v), want %v (vm.unprivileged_userfaultfd %q, %s: %v)", filepath.Base(c.bin), got, why, c.want, strings.TrimSpace(string(sysctl)), userfaultfdDev, dev)
		}
		if !got && (why == nil || !strings.Contains(why.Error(), "userfaultfd")) {
			t.Errorf("LazyInUserNS(%s) refuses without saying why: %v", filepath.Base(c.bin), why)
		}
	}
	// roam's own CRIU, as scripts/install-criu.sh builds it, carries the
	// fallback: on this kind of machine (Linux >= 6.1) it restores users'
	// jobs lazily.
	if dev {
		if ok, why := LazyInUserNS(DefaultPath()); !ok {
			t.Errorf("the installed CRIU (%s) cannot restore users' jobs lazily: %v; run scripts/install-criu.sh", DefaultPath(), why)
		}
	}
}
