package sim

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The hand-made trace reads as its comment says: gaps skipped over, the
// cancelled job left out, requested processors where allocated are
// unknown, memory in KB a processor.
func TestReadSWF(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "small.swf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, err := ReadSWF(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{{0, 30, 1, 0}, {5 * time.Second, 60, 2, 64}, {20 * time.Second, 45, 3, 0}, {21 * time.Second, 10, 1, 128}}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs, want %d: %+v", len(jobs), len(want), jobs)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d: %+v, want %+v", i, jobs[i], want[i])
		}
	}
	for _, bad := range []string{"1 2 3\n", "1 0 -1 x 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "1 0 -1 5 99999999 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"} {
		if _, err := ReadSWF(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "swf line 1") {
			t.Errorf("%q: %v, want an error naming line 1", bad, err)
		}
	}
}

// The generator writes what the reader reads back, and the committed
// synthetic trace is its output (ROAM_UPDATE_DOCS=1 writes it again).
func TestWriteSWF(t *testing.T) {
	gen := func() []byte {
		var b bytes.Buffer
		w := (&Poisson{Utilization: 0.7, MeanLength: 60, Shape: 1.5, RSSMB: 32}).Begin(16)
		if err := WriteSWF(&b, w, 200, 7, rand.New(rand.NewSource(1))); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	b := gen()
	jobs, err := ReadSWF(bytes.NewReader(b))
	if err != nil || len(jobs) != 200 {
		t.Fatalf("read back %d jobs: %v", len(jobs), err)
	}
	if !bytes.Equal(b, gen()) {
		t.Error("two traces of one seed differ")
	}
	path := filepath.Join("testdata", "poisson-16.swf")
	if os.Getenv("ROAM_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, b) {
		t.Errorf("%s is not the generator's output (ROAM_UPDATE_DOCS=1 go test ./internal/sim writes it): %v", path, err)
	}
}
