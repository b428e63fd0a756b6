package outbound

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"roam/internal/agent/peer"
	"roam/internal/migrate"
)

// A job that ftruncates its stdout to 4 GiB holds a few blocks of disk:
// a checkpoint or a migration of it (both stream streamFiles' files)
// moves no more than those blocks. It is refused, before a byte moves;
// output written as zeros, no hole, still moves.
func TestSparseOutputMovesNoMoreThanItsBlocks(t *testing.T) {
	images, spool := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(images, "pages-1.img"), make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(spool, "stdout")
	if err := os.WriteFile(out, []byte(strings.Repeat("real output\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spool, "stderr"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dense, err := streamFiles(images, spool)
	if err != nil {
		t.Fatalf("dense output refused: %v", err)
	}
	if err := os.Truncate(out, 4<<30); err != nil {
		t.Fatal(err)
	}
	var real int64
	for _, dir := range []string{images, spool} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			fi, _ := e.Info()
			real += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
	}
	files, err := streamFiles(images, spool)
	if err != nil {
		if !errors.Is(err, peer.ErrPinned) || !strings.Contains(err.Error(), "sparse output") {
			t.Fatalf("refusal %v: want a pinned job's sparse output named", err)
		}
		plan, _ := migrate.NewPlan(migrate.Header{}, dense)
		t.Logf("refused, nothing moved: %v (its blocks %d bytes, before the hole the stream was %d)", err, real, plan.Size())
		return
	}
	plan, err := migrate.NewPlan(migrate.Header{}, files)
	if err != nil {
		t.Fatal(err)
	}
	// Each file's tar header and padding, and the header line, on top.
	if slack := int64(64 << 10); plan.Size() > real+slack {
		t.Fatalf("a stream of %d bytes for files of %d bytes of blocks", plan.Size(), real)
	}
	var n countWriter
	if err := plan.Write(&n, openFile); err != nil {
		t.Fatal(err)
	}
	if int64(n) > real+64<<10 {
		t.Fatalf("moved %d bytes for files of %d bytes of blocks", n, real)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
