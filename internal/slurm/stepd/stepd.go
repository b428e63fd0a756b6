// Package stepd is a small client of the slurmstepd of a Slurm job's
// extern step on this node, over the step's Unix socket in the node's
// SlurmdSpoolDir, speaking the requests of Slurm's stepd_api (22.05): it
// asks the step to adopt a process into the job (REQUEST_ADD_EXTERN_PID,
// what pam_slurm_adopt asks for an ssh session), and to read its
// accounting now (REQUEST_STEP_STAT, what sstat asks), so that the count
// the step reports at the job's end holds the CPU its processes used to
// their last moment rather than up to its last periodic poll.
//
// It must not follow a path a user could have planted: the spool is
// opened with no symbolic link anywhere in its path, must be a directory
// of root's (or Slurm's user's) that no one else may write, and the socket
// in it one of theirs; the socket is then reached through that open
// directory. Every exchange is bounded by a deadline and every answer by
// its size. Only root (or SlurmUser) may ask a step to adopt a process.
package stepd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/slurm"
)

// The numbers of Slurm's stepd protocol (src/common/stepd_api.h and
// slurm_protocol_common.h of 22.05).
const (
	// protocolVersion is what the client says it speaks first
	// (SLURM_22_05_PROTOCOL_VERSION); the step answers with its own, or
	// -1 for a version it does not take.
	protocolVersion = 38 << 8
	// minProtocolVersion is the oldest a step may answer with
	// (SLURM_20_11_PROTOCOL_VERSION, 22.05's oldest).
	minProtocolVersion = 36 << 8
	reqState           = 5  // REQUEST_STATE
	reqStepStat        = 17 // REQUEST_STEP_STAT
	reqAddExternPID    = 22 // REQUEST_ADD_EXTERN_PID
	slurmSuccess       = 0  // SLURM_SUCCESS
	stepRunning        = 2  // SLURMSTEPD_STEP_RUNNING
)

// DefaultTimeout bounds one exchange with a step: a step that does not
// answer in that long is left, and the caller goes on.
const DefaultTimeout = 5 * time.Second

// maxStat bounds the accounting record a step sends back for a stat (some
// hundreds of bytes; its TRES arrays grow with the site's TRES).
const maxStat = 1 << 20

// ErrStepd is the kind of every failure here.
var ErrStepd = errors.New("slurmstepd")

// Client reaches the extern steps of the jobs on one node.
type Client struct {
	// Spool is the node's SlurmdSpoolDir (%n expanded): where each
	// step's socket is.
	Spool string
	// Node is the node's NodeName, which the sockets' names begin with.
	Node string
	// Owners are the uids the spool and a socket may belong to: root's
	// and SlurmUser's (slurmstepd runs as root).
	Owners []uint32
	// Timeout bounds one exchange; 0 is DefaultTimeout.
	Timeout time.Duration
}

// Adopt asks job's extern step to adopt process pid: Slurm's proctrack
// puts it into the step's container (its freezer group), its task plugin
// and jobacct_gather into the step's task groups on this node, and the
// step watches it until it ends.
func (c Client) Adopt(job string, pid int) error {
	if pid <= 0 || pid > 1<<22 {
		return fmt.Errorf("%w: job %s: %d is not a pid", ErrStepd, job, pid)
	}
	return c.exchange(job, "adopt pid "+strconv.Itoa(pid), func(conn net.Conn) error {
		if err := writeInts(conn, reqAddExternPID, int32(pid)); err != nil {
			return err
		}
		rc, err := readInt(conn)
		if err != nil {
			return err
		}
		if rc != slurmSuccess {
			return fmt.Errorf("refused (%d; the node's slurmd log says why)", rc)
		}
		return nil
	})
}

// Poll asks job's extern step for its accounting, which it reads from its
// groups first: its count is then current, whatever happens to the job
// after. A step that is not running (its job ends) is left alone: it
// waits for every connection to it before it exits, and reads its count
// one last time itself.
func (c Client) Poll(job string) error {
	return c.exchange(job, "stat", func(conn net.Conn) error {
		if err := writeInts(conn, reqState); err != nil {
			return err
		}
		state, err := readInt(conn)
		if err != nil || state != stepRunning {
			return err
		}
		if err := writeInts(conn, reqStepStat); err != nil {
			return err
		}
		n, err := readInt(conn)
		if err != nil {
			return err
		}
		if n < 0 || n > maxStat {
			return fmt.Errorf("an accounting record of %d bytes", n)
		}
		if _, err := io.CopyN(io.Discard, conn, int64(n)); err != nil {
			return err
		}
		_, err = readInt(conn) // its task count
		return err
	})
}

// exchange connects to job's extern step, says the protocol's version,
// and runs do on the connection, all within the timeout.
func (c Client) exchange(job, what string, do func(net.Conn) error) error {
	conn, err := c.dial(job)
	if err != nil {
		return fmt.Errorf("%w: job %s: %s: %v", ErrStepd, job, what, err)
	}
	defer conn.Close()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	err = writeInts(conn, protocolVersion)
	if err == nil {
		var v int32
		if v, err = readInt(conn); err == nil && v < minProtocolVersion {
			err = fmt.Errorf("the step speaks protocol %d, not one of 22.05's", v)
		}
	}
	if err == nil {
		err = do(conn)
	}
	if err != nil {
		return fmt.Errorf("%w: job %s: %s: %v", ErrStepd, job, what, err)
	}
	return nil
}

// dial connects to job's extern step's socket, reached through the spool
// opened without following any link, after checking both are root's.
func (c Client) dial(job string) (net.Conn, error) {
	name, err := slurm.StepdSocket(c.Node, job)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.Spool) {
		return nil, fmt.Errorf("spool %q is not an absolute path", c.Spool)
	}
	dir, err := unix.Openat2(unix.AT_FDCWD, c.Spool, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", c.Spool, err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return nil, fmt.Errorf("spool %s: %w", c.Spool, err)
	}
	if !slices.Contains(c.Owners, st.Uid) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("spool %s belongs to uid %d, mode %o: not root's (or SlurmUser's) alone", c.Spool, st.Uid, st.Mode&0o7777)
	}
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("no step socket %s (the job's extern step is not on this node): %w", filepath.Join(c.Spool, name), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || !slices.Contains(c.Owners, st.Uid) {
		return nil, fmt.Errorf("%s is not a socket of root's (or SlurmUser's)", filepath.Join(c.Spool, name))
	}
	// Through the directory opened above: no link is followed, and the
	// path fits sun_path whatever the spool's length.
	return net.DialTimeout("unix", "/proc/self/fd/"+strconv.Itoa(dir)+"/"+name, DefaultTimeout)
}

// writeInts writes C ints as the step reads them (this machine's order).
func writeInts(w io.Writer, vs ...int32) error {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.NativeEndian.AppendUint32(b, uint32(v))
	}
	_, err := w.Write(b)
	return err
}

func readInt(r io.Reader) (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int32(binary.NativeEndian.Uint32(b[:])), nil
}

// Owners are root's uid and, when this machine has a user slurm (Debian's
// SlurmUser), its uid.
func Owners() []uint32 {
	out := []uint32{0}
	if u, err := user.Lookup("slurm"); err == nil {
		if id, err := strconv.ParseUint(u.Uid, 10, 32); err == nil && id != 0 {
			out = append(out, uint32(id))
		}
	}
	return out
}
