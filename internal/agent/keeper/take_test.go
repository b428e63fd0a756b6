package keeper

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/migrate"
)

// counting counts the bytes read from r.
type counting struct {
	r io.Reader
	n int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// garbage is an endless reader of bytes no seal matches.
type garbage struct{}

func (garbage) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return len(p), nil
}

// An upload is judged by its head before its body is taken, and each
// chunk as it comes: a GiB of garbage, and a GiB of garbage behind the
// head of a real file (a user's own checkpoint, whose head they have),
// are refused within their first MiB, and nothing of them is left.
func TestTakeRefusesGarbageInItsFirstMiB(t *testing.T) {
	k := newKeeper(t, 2<<30)
	real := fileOf(t, key, "c1", "n1.5", 1, t0, 3*migrate.CheckpointChunk)
	_, head, _, err := migrate.ReadHead(bufioOf(real), key)
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for name, r := range map[string]io.Reader{
		"garbage":              garbage{},
		"a real head, garbage": io.MultiReader(bytes.NewReader(real[:head+100]), garbage{}),
	} {
		c := &counting{r: r}
		_, _, err := k.Take(c, 1<<30, "g", func(migrate.Binding) error { admitted++; return nil })
		if !errors.Is(err, peer.ErrBadRequest) || c.n > 1<<20 {
			t.Errorf("%s: %v after %d bytes read, want refused within 1 MiB", name, err, c.n)
		}
		t.Logf("%s: refused after %d bytes: %v", name, c.n, err)
	}
	if admitted != 0 {
		t.Errorf("a garbage upload was admitted %d times: its length is not its head's", admitted)
	}
	// The real head with its real length, then garbage: admitted by its
	// head, refused at its first chunk.
	c := &counting{r: io.MultiReader(bytes.NewReader(real[:head+100]), garbage{})}
	_, _, err = k.Take(c, int64(len(real)), "h", func(migrate.Binding) error { return nil })
	if !errors.Is(err, peer.ErrBadRequest) || !strings.Contains(err.Error(), "chunk 1") || c.n > 1<<20 {
		t.Errorf("a real head and garbage: %v after %d bytes", err, c.n)
	}
	if n, b := k.InFlight(70001); n != 0 || b != 0 {
		t.Errorf("in flight after the refusals: %d files, %d bytes", n, b)
	}
	assertEmpty(t, k)
}

// A file of another cluster (with the same secret), one past its expiry,
// and one of format version 1 are refused by their head, saying why; the
// caller's check (admit) refuses before the body is read.
func TestTakeRefusesByTheHead(t *testing.T) {
	k := newKeeper(t, 1<<30)
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"another cluster's": {fileOf(t, key, "c2", "n1.6", 1, t0, 3), `cluster "c2", this is cluster "c1"`},
		"expired":           {fileOf(t, key, "c1", "n1.6", 1, t0.Add(-expiry-time.Second), 3), "limits.checkpoint_expiry"},
		"version 1":         {[]byte("roam-checkpoint 1\n{\"version\":1}\n"), "older roam"},
	} {
		if _, err := take(t, k, tc.b, "x"); !errors.Is(err, peer.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	b := fileOf(t, key, "c1", "n1.6", 1, t0, 2*migrate.CheckpointChunk)
	c := &counting{r: bytes.NewReader(b)}
	_, _, err := k.Take(c, int64(len(b)), "y", func(bd migrate.Binding) error {
		return errors.New("uid " + "70001 may not")
	})
	if err == nil || c.n > 64<<10 {
		t.Errorf("refused by its caller's check: %v after %d of %d bytes", err, c.n, len(b))
	}
	assertEmpty(t, k)
}

// A user's files in flight are bounded in number and bytes, kept ones in
// bytes; root's are counted, never refused at a budget; anyone's past the
// state disk's reserve is; a hold ends once.
func TestBudgets(t *testing.T) {
	k := newKeeper(t, 1<<30)
	k.lim.CheckpointsInFlight, k.lim.CheckpointBytesInFlight, k.lim.CheckpointBytesKept = 2, 10000, 8000
	r1, err := k.Hold(70001, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Hold(70001, 7000); !errors.Is(err, peer.ErrLimit) || !strings.Contains(err.Error(), "limits.checkpoint_bytes_in_flight") {
		t.Fatalf("past the bytes: %v", err)
	}
	r2, _ := k.Hold(70001, 1000)
	if _, err := k.Hold(70001, 1); !errors.Is(err, peer.ErrLimit) || !strings.Contains(err.Error(), "limits.checkpoints_in_flight") {
		t.Fatalf("past the count: %v", err)
	}
	if _, err := k.Hold(0, 1<<20); err != nil {
		t.Fatalf("root's, past every user budget: %v", err)
	}
	// Anyone's file that would eat into the state disk's reserve.
	if _, err := k.Hold(0, 1<<50); !errors.Is(err, peer.ErrLimit) || !strings.Contains(err.Error(), "limits.disk_reserve_bytes") {
		t.Fatalf("root's, past the disk's free space: %v", err)
	}
	r1()
	r1()
	if n, b := k.InFlight(70001); n != 1 || b != 1000 {
		t.Fatalf("after one release (twice): %d files, %d bytes", n, b)
	}
	r2()
	k.lim.CheckpointBytesInFlight = 1 << 20
	// Kept: a second job's file past the user's budget is refused, the
	// first job's newer one (replacing it) is not.
	b := fileOf(t, key, "c1", "n1.7", 1, t0, 3000)
	f, _ := take(t, k, b, "k1")
	if err := k.Keep("n1.7", f); err != nil {
		t.Fatal(err)
	}
	f, _ = take(t, k, fileOf(t, key, "c1", "n1.8", 1, t0, 3000), "k2")
	if err := k.Keep("n1.8", f); !errors.Is(err, peer.ErrLimit) || !strings.Contains(err.Error(), "limits.checkpoint_bytes_kept") || k.Stored("n1.8") != "" {
		t.Fatalf("past the kept bytes: %v", err)
	}
	f, _ = take(t, k, fileOf(t, key, "c1", "n1.7", 1, t0.Add(time.Minute), 3000), "k3")
	if err := k.Keep("n1.7", f); err != nil {
		t.Fatalf("a newer file of the same job: %v", err)
	}
	if got := k.KeptBytes(70001); got == 0 || got > 8000 {
		t.Fatalf("kept bytes %d", got)
	}
	// A start finds the kept files again.
	k2 := newKeeper(t, 1<<30)
	k2.dir = k.dir
	k2.RemovePartial()
	if got := k2.KeptFiles(); len(got) != 1 || got[0].ID != "n1.7" || got[0].UID != 70001 || !got[0].Expires.Equal(t0.Add(time.Minute+expiry)) {
		t.Fatalf("kept files found at a start: %+v", got)
	}
}

func bufioOf(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func assertEmpty(t *testing.T, k *Keeper) {
	t.Helper()
	if ents, _ := os.ReadDir(k.Dir()); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}
