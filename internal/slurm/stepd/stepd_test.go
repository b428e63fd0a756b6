package stepd

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeStep serves one extern step's socket as Slurm 22.05's slurmstepd
// does: the protocol version first, then requests, each answered by
// answer (nil: no answer at all).
type fakeStep struct {
	asked  chan []int32 // each request: its number and what followed
	answer func(req int32, c net.Conn)
}

func (f *fakeStep) serve(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.conn(c)
		}
	}()
}

func (f *fakeStep) conn(c net.Conn) {
	defer c.Close()
	v, err := readInt(c)
	if err != nil || v < minProtocolVersion {
		_ = writeInts(c, -1)
		return
	}
	_ = writeInts(c, protocolVersion)
	for {
		req, err := readInt(c)
		if err != nil {
			return
		}
		got := []int32{req}
		if req == reqAddExternPID {
			pid, _ := readInt(c)
			got = append(got, pid)
		}
		f.asked <- got
		if f.answer == nil {
			time.Sleep(time.Hour)
		}
		f.answer(req, c)
	}
}

func ok(req int32, c net.Conn) {
	if req == reqState {
		_ = writeInts(c, stepRunning)
		return
	}
	if req == reqStepStat {
		_ = writeInts(c, 5)
		_, _ = c.Write([]byte("acct!"))
		_ = writeInts(c, 1)
		return
	}
	_ = writeInts(c, slurmSuccess)
}

// spool makes a node's spool with the socket of job 42's extern step,
// served by f, and a client of it.
func spool(t *testing.T, f *fakeStep) (Client, string) {
	t.Helper()
	dir := t.TempDir()
	if f != nil {
		f.asked = make(chan []int32, 8)
		f.serve(t, filepath.Join(dir, "n2_42.4294967292"))
	}
	return Client{Spool: dir, Node: "n2", Owners: []uint32{uint32(os.Getuid())}, Timeout: 2 * time.Second}, dir
}

// TestAdoptAndPoll: Adopt sends REQUEST_ADD_EXTERN_PID with the pid after
// the protocol's version, and Poll REQUEST_STEP_STAT, reading its answer
// whole; a step that refuses is an error naming the job.
func TestAdoptAndPoll(t *testing.T) {
	f := &fakeStep{answer: ok}
	c, _ := spool(t, f)
	if err := c.Adopt("42", 1234); err != nil {
		t.Fatal(err)
	}
	if got := <-f.asked; len(got) != 2 || got[0] != 22 || got[1] != 1234 {
		t.Errorf("the step was asked %v, want [22 1234]", got)
	}
	if err := c.Poll("42"); err != nil {
		t.Fatal(err)
	}
	if got := []int32{(<-f.asked)[0], (<-f.asked)[0]}; got[0] != 5 || got[1] != 17 {
		t.Errorf("the step was asked %v, want [5 17] (its state, then a stat)", got)
	}
	// A step that ends is not asked for a stat.
	f.answer = func(req int32, c net.Conn) { _ = writeInts(c, 3) }
	if err := c.Poll("42"); err != nil {
		t.Fatal(err)
	}
	if got := <-f.asked; got[0] != 5 {
		t.Errorf("the step was asked %v, want [5]", got)
	}
	select {
	case got := <-f.asked:
		t.Errorf("a step that ends was asked %v", got)
	case <-time.After(100 * time.Millisecond):
	}
	f.answer = ok
	f.answer = func(req int32, c net.Conn) { _ = writeInts(c, -1) }
	if err := c.Adopt("42", 1234); err == nil || !errors.Is(err, ErrStepd) || !strings.Contains(err.Error(), "job 42") {
		t.Errorf("a refused adoption: %v", err)
	}
}

// TestBoundedAnswers: a step that says nothing, or announces a record past
// the bound, costs the caller the timeout at most and is an error.
func TestBoundedAnswers(t *testing.T) {
	f := &fakeStep{}
	c, _ := spool(t, f)
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	if err := c.Adopt("42", 7); err == nil {
		t.Error("a step that never answers: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a step that never answers held the caller %v", d)
	}
	f.answer = func(req int32, c net.Conn) {
		if req == reqState {
			_ = writeInts(c, stepRunning)
			return
		}
		_ = writeInts(c, maxStat+1)
	}
	if err := c.Poll("42"); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a record past the bound: %v", err)
	}
	for _, pid := range []int{0, -1, 1 << 23} {
		if err := c.Adopt("42", pid); err == nil {
			t.Errorf("Adopt(%d): no error", pid)
		}
	}
}

// TestRefusesWhatAUserCouldPlant: no step socket is reached through a
// symbolic link (of the socket or of the spool), in a spool others may
// write, or where the socket is not a socket; a job or node that is not
// a name is refused before any path is built.
func TestRefusesWhatAUserCouldPlant(t *testing.T) {
	f := &fakeStep{answer: ok}
	c, dir := spool(t, f)
	real := filepath.Join(dir, "n2_42.4294967292")

	if err := os.Symlink(real, filepath.Join(dir, "n2_43.4294967292")); err != nil {
		t.Fatal(err)
	}
	if err := c.Adopt("43", 7); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a socket that is a link: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "n2_44.4294967292"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Adopt("44", 7); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a socket that is a file: %v", err)
	}
	if err := c.Adopt("45", 7); err == nil || !strings.Contains(err.Error(), "not on this node") {
		t.Errorf("no socket: %v", err)
	}
	link := filepath.Join(t.TempDir(), "spool")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	viaLink := c
	viaLink.Spool = link
	if err := viaLink.Adopt("42", 7); err == nil {
		t.Error("a spool that is a link: no error")
	}
	for _, bad := range []struct{ job, node string }{{"../42", "n2"}, {"42", "../n2"}, {"42", ""}} {
		b := c
		b.Node = bad.node
		if err := b.Adopt(bad.job, 7); err == nil {
			t.Errorf("job %q node %q: no error", bad.job, bad.node)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := c.Adopt("42", 7); err == nil || !strings.Contains(err.Error(), "mode 777") {
		t.Errorf("a spool anyone may write: %v", err)
	}
	other := c
	other.Owners = []uint32{uint32(os.Getuid()) + 1}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := other.Adopt("42", 7); err == nil || !strings.Contains(err.Error(), "belongs to uid") {
		t.Errorf("a spool of another uid: %v", err)
	}
	select {
	case got := <-f.asked:
		t.Errorf("a refused path still reached the step: %v", got)
	default:
	}
}
