package slurmstep

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"roam/internal/slurm/stepd"
)

// fakeStepRequests serves job 7's extern step socket on node n1 in dir,
// answering every request with success (a stat with an empty record), and
// sends each request's number on the channel.
func fakeStepRequests(t *testing.T, dir string) <-chan int32 {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, "n1_7.4294967292"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan int32, 16)
	read := func(r io.Reader) (int32, error) {
		var b [4]byte
		_, err := io.ReadFull(r, b[:])
		return int32(binary.NativeEndian.Uint32(b[:])), err
	}
	write := func(w io.Writer, vs ...int32) {
		for _, v := range vs {
			_, _ = w.Write(binary.NativeEndian.AppendUint32(nil, uint32(v)))
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := read(c); err != nil {
					return
				}
				write(c, 38<<8)
				for {
					req, err := read(c)
					if err != nil {
						return
					}
					if req == 22 {
						_, _ = read(c) // the pid
						write(c, 0)
					} else if req == 5 {
						write(c, 2) // running
					} else {
						write(c, 0, 0) // an empty record, no task
					}
					got <- req
				}
			}()
		}
	}()
	return got
}

// TestStepPolledWhenTheLastProcessEnds: each process of a Slurm job started
// here that is in no step's task group is adopted by the step; the step is
// asked to read its count once the job's last process here has ended, not
// before.
func TestStepPolledWhenTheLastProcessEnds(t *testing.T) {
	dir := t.TempDir()
	got := fakeStepRequests(t, dir)
	s := &Steps{step: stepd.Client{Spool: dir, Node: "n1", Owners: []uint32{uint32(os.Getuid())}, Timeout: 5 * time.Second},
		log: slog.New(slog.DiscardHandler), mu: &sync.Mutex{}, live: map[string]int{}}
	var procs []*exec.Cmd
	for range 2 {
		p := exec.Command("sleep", "60")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Process.Kill(); _, _ = p.Process.Wait() })
		procs = append(procs, p)
		s.started("7", p.Process.Pid)
	}
	next := func(what string) int32 {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("the step was not asked: %s", what)
			return 0
		}
	}
	for range 2 {
		if r := next("adopt"); r != 22 {
			t.Fatalf("the step was asked %d, want 22 (adopt)", r)
		}
	}
	_ = procs[0].Process.Kill()
	_, _ = procs[0].Process.Wait()
	select {
	case r := <-got:
		t.Fatalf("the step was asked %d while a process of its job still runs here", r)
	case <-time.After(300 * time.Millisecond):
	}
	_ = procs[1].Process.Kill()
	_, _ = procs[1].Process.Wait()
	if r := []int32{next("its state once the last process ended"), next("stat")}; r[0] != 5 || r[1] != 17 {
		t.Fatalf("the step was asked %v, want [5 17] (its state, a stat)", r)
	}
}
