package ckpt

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"roam/internal/procfs"
)

// A periodic timerfd that has fired and not been read since is, to the
// kernel, waiting for its read to re-arm it: /proc's fdinfo then shows
// it_value (0, 0). CRIU dumps that, and its restore sets the timer with
// it_value 0, which disarms it: after a migration the job's periodic
// timer never fires again. A job frozen for longer than its timer's
// period is always caught so. rearmTimerfds, after the restore and
// before the job runs, re-arms each such timer one period ahead and
// gives it back its ticks.

// Timerfd is a timerfd's state as its fdinfo shows it.
type Timerfd struct {
	Clock    int
	Ticks    uint64
	Flags    uint64 // settime flags (TFD_TIMER_ABSTIME, ...)
	Value    unix.Timespec
	Interval unix.Timespec
}

// ParseTimerfd reads a timerfd's fdinfo.
func ParseTimerfd(fdinfo string) (Timerfd, bool) {
	var t Timerfd
	var seen [3]bool // ticks, it_value, it_interval
	for _, line := range strings.Split(fdinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "clockid":
			t.Clock, err = strconv.Atoi(v)
		case "ticks":
			t.Ticks, err = strconv.ParseUint(v, 10, 64)
			seen[0] = err == nil
		case "settime flags":
			t.Flags, err = strconv.ParseUint(v, 8, 64)
		case "it_value":
			t.Value, err = parsePair(v)
			seen[1] = err == nil
		case "it_interval":
			t.Interval, err = parsePair(v)
			seen[2] = err == nil
		}
		if err != nil {
			return Timerfd{}, false
		}
	}
	return t, seen == [3]bool{true, true, true}
}

// parsePair reads fdinfo's "(SEC, NSEC)".
func parsePair(v string) (unix.Timespec, error) {
	s, ok := strings.CutPrefix(v, "(")
	s, ok2 := strings.CutSuffix(s, ")")
	a, b, ok3 := strings.Cut(s, ",")
	if !ok || !ok2 || !ok3 {
		return unix.Timespec{}, fmt.Errorf("timerfd time %q", v)
	}
	sec, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	nsec, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil || sec < 0 || nsec < 0 || nsec >= 1e9 {
		return unix.Timespec{}, fmt.Errorf("timerfd time %q", v)
	}
	return unix.Timespec{Sec: sec, Nsec: nsec}, nil
}

// Disarmed says whether CRIU left this periodic timer disarmed: no next
// expiry, a period, ticks it restored, and relative times (an absolute
// timer CRIU sets again from the clock).
func (t Timerfd) Disarmed() bool {
	return t.Value == (unix.Timespec{}) && t.Interval != (unix.Timespec{}) && t.Ticks > 0 && t.Flags == 0
}

// tfdSetTicks is TFD_IOC_SET_TICKS, _IOW('T', 0, u64).
const tfdSetTicks = 0x40085400

// rearmTimerfds re-arms the periodic timerfds of the restored tree under
// root that CRIU left disarmed (see Timerfd.Disarmed).
func rearmTimerfds(root int) error {
	for _, p := range procfs.Tree(root) {
		if err := rearmProcess(p); err != nil {
			return err
		}
	}
	return nil
}

// rearmProcess re-arms process p's disarmed periodic timerfds. The pidfd
// is opened first: the fdinfo read after it is that very process's.
func rearmProcess(p int) error {
	proc := "/proc/" + strconv.Itoa(p)
	pidfd, err := unix.PidfdOpen(p, 0)
	if err != nil {
		return nil // ended
	}
	defer unix.Close(pidfd)
	ents, _ := os.ReadDir(proc + "/fd")
	for _, e := range ents {
		if l, err := os.Readlink(proc + "/fd/" + e.Name()); err != nil || l != "anon_inode:[timerfd]" {
			continue
		}
		info, err := os.ReadFile(proc + "/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		t, ok := ParseTimerfd(string(info))
		if !ok || !t.Disarmed() {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		if err := rearm(pidfd, n, t); err != nil {
			return fmt.Errorf("timerfd %d of process %d: %w", n, p, err)
		}
	}
	return nil
}

// rearm sets a process's timerfd n to fire one period from now, with its
// ticks.
func rearm(pidfd, n int, t Timerfd) error {
	fd, err := unix.PidfdGetfd(pidfd, n, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	spec := unix.ItimerSpec{Interval: t.Interval, Value: t.Interval}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		return err
	}
	ticks := t.Ticks
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), tfdSetTicks, uintptr(unsafe.Pointer(&ticks))); e != 0 {
		return e
	}
	return nil
}
