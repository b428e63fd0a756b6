package ckpt

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/checkpoint-restore/go-criu/v7/stats"
	"google.golang.org/protobuf/proto"
)

// A dump's time splits by CRIU's statistics: its set-up (the job runs),
// the seizing, the state and the pages (the job is stopped), adding up
// to the call's wall time; without statistics it is one frozen part.
func TestDumpTimesSplitByCRIUStatistics(t *testing.T) {
	dir := t.TempDir()
	img := statsImage(t, &stats.StatsEntry{Dump: &stats.DumpStatsEntry{FreezingTime: proto.Uint32(2000), FrozenTime: proto.Uint32(60000),
		MemdumpTime: proto.Uint32(25000), MemwriteTime: proto.Uint32(20000), PagesScanned: proto.Uint64(1),
		PagesSkippedParent: proto.Uint64(0), PagesWritten: proto.Uint64(1), PagesLazy: proto.Uint64(0)}})
	if err := os.WriteFile(filepath.Join(dir, stats.StatsDump), img, 0o600); err != nil {
		t.Fatal(err)
	}
	got := dumpTimes(dir, 10*time.Millisecond, 100*time.Millisecond)
	want := Times{{Name: "criu start", MS: 10}, {Name: "criu setup", MS: 28}, {Name: "criu freeze", MS: 2, Frozen: true},
		{Name: "criu dump", MS: 35, Frozen: true}, {Name: "criu pages", MS: 25, Frozen: true}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("part %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if got.Sum(false) != 100 || got.Sum(true) != 62 {
		t.Fatalf("sums %v, %v; want 100 and 62", got.Sum(false), got.Sum(true))
	}
	// A cut-off image is no statistics: one part.
	if err := os.WriteFile(filepath.Join(dir, stats.StatsDump), img[:len(img)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	got = dumpTimes(dir, 10*time.Millisecond, 100*time.Millisecond)
	if len(got) != 2 || got[1].Name != "criu dump" || got[1].MS != 90 || !got[1].Frozen {
		t.Fatalf("cut-off statistics: %+v", got)
	}
}

// A restore's time splits the same way.
func TestRestoreTimesSplitByCRIUStatistics(t *testing.T) {
	dir := t.TempDir()
	img := statsImage(t, &stats.StatsEntry{Restore: &stats.RestoreStatsEntry{PagesCompared: proto.Uint64(0), PagesSkippedCow: proto.Uint64(0),
		ForkingTime: proto.Uint32(5000), RestoreTime: proto.Uint32(45000)}})
	if err := os.WriteFile(filepath.Join(dir, stats.StatsRestore), img, 0o600); err != nil {
		t.Fatal(err)
	}
	got := restoreTimes(dir, 8*time.Millisecond, 60*time.Millisecond)
	want := Times{{Name: "criu start", MS: 8}, {Name: "criu setup", MS: 7}, {Name: "criu fork", MS: 5}, {Name: "criu restore", MS: 40}}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}
