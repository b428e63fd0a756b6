package keeper

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/migrate"
)

var (
	key = []byte("the cluster's checkpoint key")
	t0  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// file is a checkpoint file of job id, incarnation inc, taken at at, as a
// node of cluster c1 writes one, sealed with k.
func file(t *testing.T, k []byte, id string, inc int, at time.Time) []byte {
	t.Helper()
	return fileOf(t, k, "c1", id, inc, at, 3)
}

// fileOf is a checkpoint file of cluster cluster, whose image is size
// bytes.
func fileOf(t *testing.T, k []byte, cluster, id string, inc int, at time.Time, size int) []byte {
	t.Helper()
	home, _ := migrate.JobHome(id)
	h := migrate.Header{MID: "0123456789abcdef", From: "n3", ID: id, Home: home, HomeAddr: "198.18.0.1:7947", UID: 70001, GID: 70001,
		Started: t0, Inc: inc}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "inventory.img"), bytes.Repeat([]byte("i"), size), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := migrate.NewPlan(h, []migrate.File{{Name: "img/inventory.img", Path: filepath.Join(dir, "inventory.img"), Size: int64(size)}})
	if err != nil {
		t.Fatal(err)
	}
	bind := migrate.Binding{Cluster: cluster, UID: h.UID, GID: h.GID, Job: id, Expires: at.Add(expiry)}
	c, err := migrate.NewCheckpointPlan(bind, migrate.CheckpointMeta{Version: migrate.CheckpointVersion, At: at, Node: "n3",
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Group: id, Started: t0}}, p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, k, func(path string) (io.ReadCloser, error) { return os.Open(path) }); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// take takes b, its hold ended at once.
func take(t *testing.T, k *Keeper, b []byte, mid string) (File, error) {
	t.Helper()
	f, release, err := k.Take(bytes.NewReader(b), int64(len(b)), mid, func(migrate.Binding) error { return nil })
	if release != nil {
		release()
	}
	return f, err
}

const expiry = 30 * 24 * time.Hour

// newKeeper is a keeper of cluster c1 taking files up to max bytes, its
// clock at t0.
func newKeeper(t *testing.T, max int64) *Keeper {
	lim := limits.Default()
	lim.CheckpointBytes, lim.CheckpointExpiry = max, expiry
	k := New(t.TempDir(), key, "c1", lim, 1)
	k.now = func() time.Time { return t0 }
	return k
}

// A file is taken only whole, sealed with the cluster's key and within
// the bound; a refused one leaves nothing behind.
func TestTakeChecksEveryFile(t *testing.T) {
	good := file(t, key, "n1.1", 1, t0)
	k := newKeeper(t, int64(len(good)))
	f, err := take(t, k, good, "a")
	if err != nil || f.Hdr.ID != "n1.1" || !f.Meta.At.Equal(t0) || f.Size != int64(len(good)) {
		t.Fatalf("a good file: %+v %v", f, err)
	}
	os.Remove(f.Path)
	for name, b := range map[string][]byte{
		"another key's": file(t, []byte("another cluster"), "n1.1", 1, t0),
		"cut short":     good[:len(good)-1],
		"one bit off":   append(append([]byte{}, good[:10]...), append([]byte{good[10] ^ 1}, good[11:]...)...),
	} {
		if _, err := take(t, k, b, "b"); !errors.Is(err, peer.ErrBadRequest) {
			t.Errorf("%s file: %v", name, err)
		}
	}
	if _, err := take(t, k, append(bytes.Clone(good), 0), "b"); !errors.Is(err, peer.ErrLimit) {
		t.Errorf("too large file: %v", err)
	}
	// The length a request says is refused before a byte is read.
	if _, _, err := k.Take(strings.NewReader(""), 1<<40, "c", nil); err == nil || !strings.Contains(err.Error(), "limits.checkpoint_bytes") {
		t.Errorf("a 1 TiB upload: %v", err)
	}
	if ents, _ := os.ReadDir(k.Dir()); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// The keeper keeps the newest file of a job: a later incarnation, or the
// same one taken later; Drop removes it unless it is newer than asked,
// and Open hands out a link of its own.
func TestKeepTheNewest(t *testing.T) {
	k := newKeeper(t, 1<<20)
	keep := func(inc int, at time.Time) {
		t.Helper()
		f, err := take(t, k, file(t, key, "n1.2", inc, at), "m")
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Keep("n1.2", f); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(f.Path); !os.IsNotExist(err) {
			t.Fatalf("the taken file is still there: %v", err)
		}
	}
	kept := func() (int, time.Time) {
		t.Helper()
		f, err := k.Read(k.Stored("n1.2"))
		if err != nil {
			t.Fatal(err)
		}
		return f.Hdr.Inc, f.Meta.At
	}
	keep(1, t0.Add(time.Minute))
	keep(1, t0) // older, of the same incarnation
	if inc, at := kept(); inc != 1 || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("kept %d %v after an older one came", inc, at)
	}
	keep(2, t0) // a later incarnation, taken earlier by its clock
	keep(1, t0.Add(time.Hour))
	if inc, _ := kept(); inc != 2 {
		t.Fatalf("kept incarnation %d, want 2", inc)
	}
	f, err := k.Open("n1.2", "r", "n9")
	if err != nil || f.Hdr.Inc != 2 || f.Path == k.Stored("n1.2") {
		t.Fatalf("open: %+v %v", f, err)
	}
	os.Remove(f.Path)
	if err := k.Drop("n1.2", t0.Add(-time.Second)); err != nil || k.Stored("n1.2") == "" {
		t.Fatalf("a drop of those before a time it is newer than took it: %v", err)
	}
	if err := k.Drop("n1.2", time.Time{}); err != nil || k.Stored("n1.2") != "" {
		t.Fatalf("drop: %v, still %q", err, k.Stored("n1.2"))
	}
	if _, err := k.Open("n1.2", "s", "n9"); !errors.Is(err, peer.ErrNotFound) || !strings.Contains(err.Error(), "node n9 keeps no checkpoint of job n1.2") {
		t.Fatalf("open of none: %v", err)
	}
	if k.Stored("../n1.2") != "" || k.Stored("x") != "" {
		t.Fatal("a name that is not a job id was looked up")
	}
}

// What an earlier run left half-written goes at the start; kept files
// stay, and the files of restarts, which the restarted agent finishes.
func TestRemovePartial(t *testing.T) {
	k := newKeeper(t, 1<<20)
	f, err := take(t, k, file(t, key, "n1.3", 1, t0), "x")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := take(t, k, file(t, key, "n1.3", 1, t0), "y")
	if err := k.Keep("n1.3", g); err != nil {
		t.Fatal(err)
	}
	run, _ := k.NewPath(Restarting, "z")
	if err := os.WriteFile(run, []byte("a restart's file"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.RemovePartial()
	if _, err := os.Stat(f.Path); !os.IsNotExist(err) || k.Stored("n1.3") == "" {
		t.Fatalf("partial file: %v; kept: %q", err, k.Stored("n1.3"))
	}
	if _, err := os.Stat(run); err != nil {
		t.Fatalf("a restart's file went: %v", err)
	}
	// Once the runs an agent finishes are known, the files of the other
	// runs the earlier agent left go; a run begun since keeps its own.
	other, _ := k.NewPath(Restarting, "w")
	if err := os.WriteFile(other, []byte("a run no record has"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.RemovePartial()
	since, _ := k.NewPath(Restarting, "v")
	if err := os.WriteFile(since, []byte("a run begun since the start"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.RemoveLeftRuns(map[string]bool{"z": true})
	for path, want := range map[string]bool{run: true, other: false, since: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: %v, want kept %v", filepath.Base(path), err, want)
		}
	}
}
