package relay

import (
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/job"
)

// A home's rule for its jobs' notes (Noted): a migration's note is kept
// once; the record moves only to a newer migration, and one that
// committed while the job was taken for lost brings it back; a note of an
// older incarnation changes nothing; a newer checkpoint kept elsewhere
// replaces the newest, which is then dropped where it was kept.
func TestNoted(t *testing.T) {
	now := time.Unix(1e9, 0)
	base := job.Record{ID: "n1.1", Home: "n1", Node: "n2", State: job.StateRunning, Migrations: 2, Inc: 1,
		MigrationLog: []job.Migration{{MID: "m2", Seq: 2, To: "n2", OK: true}}}
	inc0, inc1 := 0, 1
	lost := base
	lost.State, lost.LostAt = job.StateLost, now.Add(-time.Minute)
	older := &api.Checkpoint{OK: true, StoredOn: "n5", At: now.Add(-time.Hour)}
	withCkpt := base
	withCkpt.Newest = older
	for _, c := range []struct {
		name     string
		rec      job.Record
		n        Note
		keep     bool
		node     string
		state    string
		moves    int
		events   int
		drop     *api.Checkpoint
		newestOn string
	}{
		{name: "a note again", rec: base, n: Note{ID: "n1.1", Migration: &api.Migration{MID: "m2", Seq: 2, To: "n2", OK: true}},
			node: "n2", state: job.StateRunning, moves: 2},
		{name: "an older incarnation", rec: base, n: Note{ID: "n1.1", Node: "n9", Inc: &inc0},
			node: "n2", state: job.StateRunning, moves: 2},
		{name: "a newer migration", rec: base, n: Note{ID: "n1.1", Inc: &inc1, Migration: &api.Migration{MID: "m3", Seq: 3, To: "n3", OK: true}},
			keep: true, node: "n3", state: job.StateRunning, moves: 3},
		{name: "an older migration", rec: base, n: Note{ID: "n1.1", Migration: &api.Migration{MID: "m1", Seq: 1, To: "n4", OK: true}},
			keep: true, node: "n2", state: job.StateRunning, moves: 2},
		{name: "a migration that committed while the job was lost", rec: lost, n: Note{ID: "n1.1", Migration: &api.Migration{MID: "m3", Seq: 3, To: "n3", OK: true}},
			keep: true, node: "n3", state: job.StateRunning, moves: 3, events: 1},
		{name: "a newer checkpoint elsewhere", rec: withCkpt, n: Note{ID: "n1.1", Checkpoint: &api.Checkpoint{OK: true, StoredOn: "n6", At: now}},
			keep: true, node: "n2", state: job.StateRunning, moves: 2, drop: older, newestOn: "n6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, keep, back, drop := Noted(c.rec, c.n, now)
			if keep != c.keep || next.Node != c.node || next.State != c.state || next.Migrations != c.moves || len(back) != c.events || drop != c.drop {
				t.Fatalf("keep %v node %s state %s moves %d events %d drop %v; want %v %s %s %d %d %v",
					keep, next.Node, next.State, next.Migrations, len(back), drop, c.keep, c.node, c.state, c.moves, c.events, c.drop)
			}
			if c.newestOn != "" && (next.Newest == nil || next.Newest.StoredOn != c.newestOn) {
				t.Fatalf("newest checkpoint %v, want on %s", next.Newest, c.newestOn)
			}
			if len(c.rec.MigrationLog) != 1 {
				t.Fatal("noted changed the record it was given")
			}
		})
	}
}

// A checkpoint's CPU in a peer's note is kept only when it reads as a
// CPU's features (cpufeat); anything else is dropped: unknown.
func TestNotedKeepsOnlyACPUsFeatures(t *testing.T) {
	now := time.Unix(1e9, 0)
	rec := job.Record{ID: "n1.1", Home: "n1", Node: "n2", State: job.StateRunning}
	good := cpufeat.FromFlags(cpufeat.X86, []string{"sse2", "avx2"}).String()
	for cpu, want := range map[string]string{good: good, strings.Repeat("x", 1<<20): "", "x86_64:nothex": "", "": ""} {
		next, _, _, _ := Noted(rec, Note{ID: "n1.1", Checkpoint: &api.Checkpoint{OK: true, StoredOn: "n3", At: now, CPU: cpu}}, now)
		if next.Newest == nil || next.Newest.CPU != want {
			t.Fatalf("a note's CPU of %d bytes kept as %+v, want %q", len(cpu), next.Newest, want)
		}
	}
}
