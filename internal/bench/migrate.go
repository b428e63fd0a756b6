package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/emu"
)

// BenchUser is whom the benchmarks run users' jobs as: a uid above
// 65,535, as LDAP sites hand out, with a supplementary group above it
// too. It needs no account: the agent takes the ids from the socket.
var BenchUser = asuser.Cred{UID: 70001, GID: 70001, Groups: []uint32{70001, 170100}}

// forUsers copies program prog where BenchUser may run it on every node
// (the build tree may be in a directory only root enters), and returns
// the copy's path and what removes it.
func forUsers(prog string) (string, func(), error) {
	dir, err := os.MkdirTemp("/var/lib", "roam-bench-")
	if err != nil {
		return "", nil, err
	}
	clean := func() { os.RemoveAll(dir) }
	b, err := os.ReadFile(prog)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	p := filepath.Join(dir, filepath.Base(prog))
	if err == nil {
		err = os.WriteFile(p, b, 0o755)
	}
	if err != nil {
		clean()
		return "", nil, fmt.Errorf("copy %s for the benchmark's user: %w", prog, err)
	}
	return p, clean, nil
}

// MigrateSpec configures the migration benchmark.
type MigrateSpec struct {
	SizesMB []int
	Subnet  string
	Roamd   string
	Migjob  string // workloads/migjob, built by make
	Ckpt    string // cmd/roam-ckpt, built by make: the local dump and restore
	CRIU    string // for the local dump and restore; empty: roam's default
}

// MigratePoint is one process size, all measured in the same run: an
// eager migration 1→2, a local CRIU dump and restore of the same process
// on node 2, a raw TCP copy of as many bytes from node 1 to node 2, and a
// lazy migration 2→1; of a user's job, and, right after, the eager and
// lazy migrations of root's.
type MigratePoint struct {
	SizeMB int `json:"size_mb"`
	// Root is the same point's migrations of root's job (no user
	// namespace: the path every job took before users' jobs had one).
	Root          *MigratePoint `json:"root,omitempty"`
	Bytes         int64         `json:"bytes"`
	EagerFreezeMS float64       `json:"eager_freeze_ms"`
	EagerTotalMS  float64       `json:"eager_total_ms"`
	EagerDumpMS   float64       `json:"eager_dump_ms"`
	EagerCopyMS   float64       `json:"eager_copy_ms"`
	EagerRestMS   float64       `json:"eager_restore_ms"`
	LocalDumpMS   float64       `json:"local_dump_ms"`
	LocalRestMS   float64       `json:"local_restore_ms"`
	RawCopyMS     float64       `json:"raw_copy_ms"`
	// Ratio is the eager total over (raw copy + local dump + local
	// restore); the target is at most 1.5.
	Ratio        float64 `json:"ratio"`
	LazyFreezeMS float64 `json:"lazy_freeze_ms"`
	LazyTotalMS  float64 `json:"lazy_total_ms"`
	LazyWindowMS float64 `json:"lazy_window_ms"`
	// The lazy freeze's parts, as the migration log has them.
	LazyDumpMS float64 `json:"lazy_dump_ms"`
	LazyCopyMS float64 `json:"lazy_copy_ms"`
	LazyRestMS float64 `json:"lazy_restore_ms"`
	LazySetMS  float64 `json:"lazy_settle_ms"`
	LazyBytes  int64   `json:"lazy_bytes"`
	// Where each went, step by step: the migrations' logs, and CRIU's
	// statistics of the local dump and restore.
	EagerPhases    []api.Phase `json:"eager_phases"`
	LazyPhases     []api.Phase `json:"lazy_phases"`
	LocalDumpPh    []api.Phase `json:"local_dump_phases"`
	LocalRestorePh []api.Phase `json:"local_restore_phases"`
}

// Migrate runs the migration benchmark on a 2-node cluster it brings up
// and tears down.
func Migrate(spec MigrateSpec, progress io.Writer) ([]MigratePoint, error) {
	name := "bmig"
	_ = emu.Down(name)
	defer down(name)
	st, err := up(emu.Spec{Name: name, Nodes: 2, Subnet: spec.Subnet, Roamd: spec.Roamd})
	if err != nil {
		return nil, err
	}
	cl := api.NewClient(st.Nodes[0].Socket)
	if err := waitMembers(cl, 2); err != nil {
		return nil, err
	}
	prog, clean, err := forUsers(spec.Migjob)
	if err != nil {
		return nil, err
	}
	defer clean()
	spec.Migjob = prog
	user := api.NewClientDial(st.Nodes[0].Socket, func() (net.Conn, error) { return asuser.DialUnix(BenchUser, st.Nodes[0].Socket) })
	var out []MigratePoint
	for i, size := range spec.SizesMB {
		fmt.Fprintf(progress, "migrate: %d MiB process\n", size)
		// Root's job goes first every other repetition, so that
		// neither side of user's / root's always runs on a machine
		// the other has just warmed (or loaded); and both take the same
		// steps, the local dump and restore and the raw copy too (a job
		// restored once, or moved right after a copy of its size, moves
		// slower).
		var p, r MigratePoint
		var err, errRoot error
		if i%2 == 1 {
			r, errRoot = migratePoint(cl, cl, st, spec, size)
		}
		if errRoot == nil {
			p, err = migratePoint(cl, user, st, spec, size)
		}
		if err == nil && errRoot == nil && i%2 == 0 {
			r, errRoot = migratePoint(cl, cl, st, spec, size)
		}
		err = errors.Join(err, errRoot)
		p.Root = &r
		if err != nil {
			return out, fmt.Errorf("%d MiB: %w", size, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// migratePoint measures one point, the job started by starter's caller: a
// local dump and restore, an eager move, a raw copy of its size, and a
// lazy move back.
func migratePoint(cl, starter *api.Client, st emu.State, spec MigrateSpec, size int) (MigratePoint, error) {
	p := MigratePoint{SizeMB: size}
	ids, err := start(starter, api.RunRequest{Argv: []string{spec.Migjob, "mem", "1000000", "bench", strconv.Itoa(size)}, On: "1"})
	if err != nil {
		return p, err
	}
	id := ids[0]
	defer cl.Do(context.Background(), http.MethodPost, api.PathKill, api.KillRequest{IDs: []string{id}, Signal: 9}, nil)
	// Wait until its memory is touched: it prints its first round then.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var o api.Output
		if err := cl.Get(api.Fill(api.PathJobOutput, id)+"?wait=1s", &o); err == nil && len(o.Stdout) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("job %s printed nothing in 2 minutes", id)
		}
	}
	migrate := func(to string, lazy bool) (api.Migration, error) {
		var m api.Migration
		err := cl.Do(context.Background(), http.MethodPost, api.PathMigrate, api.MigrateRequest{ID: id, Node: to, Lazy: lazy}, &m)
		return m, err
	}
	l, err := localDumpRestore(st.Nodes[0], spec, id)
	if err != nil {
		return p, fmt.Errorf("local dump and restore: %w", err)
	}
	p.LocalDumpMS, p.LocalRestMS, p.LocalDumpPh, p.LocalRestorePh = l.DumpMS, l.RestoreMS, l.Dump, l.Restore
	m, err := migrate("2", false)
	if err != nil {
		return p, fmt.Errorf("eager migration: %w", err)
	}
	p.Bytes, p.EagerFreezeMS, p.EagerTotalMS = m.Bytes, m.FreezeMS, m.TotalMS
	p.EagerDumpMS, p.EagerCopyMS, p.EagerRestMS = m.DumpMS, m.CopyMS, m.RestoreMS
	p.EagerPhases = m.Phases
	if p.RawCopyMS, err = rawCopy(st, m.Bytes); err != nil {
		return p, fmt.Errorf("raw copy: %w", err)
	}
	p.Ratio = p.EagerTotalMS / (p.RawCopyMS + p.LocalDumpMS + p.LocalRestMS)
	m, err = migrate("1", true)
	if err != nil {
		return p, fmt.Errorf("lazy migration: %w", err)
	}
	p.LazyFreezeMS, p.LazyTotalMS, p.LazyWindowMS, p.LazyBytes = m.FreezeMS, m.TotalMS, m.WindowMS, m.Bytes
	p.LazyDumpMS, p.LazyCopyMS, p.LazyRestMS, p.LazySetMS = m.DumpMS, m.CopyMS, m.RestoreMS, m.SettleMS
	p.LazyPhases = m.Phases
	return p, nil
}

// rawCopy sends n bytes over plain TCP from node 1's network namespace to
// node 2's: the same link a migration uses, without CRIU, TLS or disks.
func rawCopy(st emu.State, n int64) (float64, error) {
	var ln net.Listener
	if err := inNetns(st.Nodes[1].Netns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(st.Nodes[1].Addr, "0"))
		return err
	}); err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		k, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- k
	}()
	var conn net.Conn
	if err := inNetns(st.Nodes[0].Netns, func() (err error) {
		conn, err = net.Dial("tcp", ln.Addr().String())
		return err
	}); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	t0 := time.Now()
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		if _, err := conn.Write(buf[:k]); err != nil {
			conn.Close()
			return 0, err
		}
		left -= k
	}
	conn.(*net.TCPConn).CloseWrite()
	k := <-got
	ms := float64(time.Since(t0).Microseconds()) / 1000
	conn.Close()
	if k != n {
		return 0, fmt.Errorf("received %d of %d bytes", k, n)
	}
	return ms, nil
}

// inNetns runs f on an OS thread inside the named network namespace; a
// socket made there stays in it.
func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: it leaves with its goroutine, and
		// never goes back to the pool in the wrong namespace.
		ns, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- err
			return
		}
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}
