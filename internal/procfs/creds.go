package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"roam/internal/proctext"
)

// TreeCreds are the credentials of every thread of the tree under pid.
func TreeCreds(pid int) ([]proctext.Creds, error) {
	var out []proctext.Creds
	for _, p := range Tree(pid) {
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // it ended since the tree was read
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			b, err := os.ReadFile(dir + e.Name() + "/status")
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			c, err := proctext.ParseCreds(string(b))
			if err != nil {
				return nil, fmt.Errorf("task %s of %d: %w", e.Name(), p, err)
			}
			c.PID, _ = strconv.Atoi(e.Name())
			// A dumpable task's /proc files are its effective ids' (its
			// directory is, whatever it is).
			var st syscall.Stat_t
			if err := syscall.Stat(dir+e.Name()+"/status", &st); errors.Is(err, syscall.ENOENT) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("task %s of %d: %w", e.Name(), p, err)
			}
			c.NoDump = st.Uid != c.UIDs[1] || st.Gid != c.GIDs[1]
			c.JobInit = p == pid && OwnUserNS(p)
			out = append(out, c)
		}
	}
	return out, nil
}

// OwnUserNS tells whether process p is in another user namespace than
// this process.
func OwnUserNS(p int) bool {
	self, err1 := os.Readlink("/proc/self/ns/user")
	ns, err2 := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/user")
	return err1 == nil && err2 == nil && ns != self
}
