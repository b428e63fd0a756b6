package job

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sweepRecs are n records of one sweep that share its argv and the first
// strings of their environment, as launch makes them.
func sweepRecs(n int, argv, env []string) []Record {
	var out []Record
	for i := range n {
		id := "n1." + string(rune('a'+i))
		out = append(out, Record{ID: id, UID: 7, Argv: argv, Env: append(env[:len(env):len(env)], "ROAM_JOB="+id),
			State: StatePending, Sweep: SweepPart{ID: "n1:1", Index: i, Count: n}})
	}
	return out
}

// A sweep's records keep its arguments once in the store: they read back
// whole, sharing one copy in memory; the arguments go with the sweep's
// last record.
func TestSweepArgumentsStoredOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("y", 1<<20)
	recs := sweepRecs(8, []string{"/bin/echo", big}, []string{"HOME=/", "BIG=" + big})
	if err := s.PutRecords(recs...); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, _ := os.Stat(path); st.Size() > 8<<20 {
		t.Fatalf("8 records sharing 2 MiB of arguments take %d bytes", st.Size())
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Records()
	if err != nil || len(got) != 8 {
		t.Fatalf("records: %d, %v", len(got), err)
	}
	for _, r := range got {
		want := recs[strings.IndexByte("abcdefgh", r.ID[3])]
		if !slices.Equal(r.Argv, want.Argv) || !slices.Equal(r.Env, want.Env) {
			t.Fatalf("record %s reads back as argv %d env %q", r.ID, len(r.Argv), r.Env[len(r.Env)-1])
		}
		if &r.Argv[0] != &got[0].Argv[0] {
			t.Fatalf("record %s has a copy of its sweep's argv", r.ID)
		}
	}
	if bad, err := s.SetAsideCorrupt(); err != nil || len(bad) != 0 {
		t.Fatalf("shared records taken for corrupt: %v %v", bad, err)
	}
	if err := s.DeleteRecords(recs[:7]); err != nil {
		t.Fatal(err)
	}
	sweepThere := func() (there bool) {
		_ = s.db.View(func(tx *bolt.Tx) error { there = tx.Bucket(bucketSweeps).Bucket([]byte("n1:1")) != nil; return nil })
		return there
	}
	if !sweepThere() {
		t.Fatal("the sweep's arguments went before its last record")
	}
	if err := s.DeleteRecords(recs[7:]); err != nil {
		t.Fatal(err)
	}
	if sweepThere() {
		t.Fatal("the sweep's arguments outlived its records")
	}
}

// A store of schema version 2, whose records each keep their arguments,
// opens as version 3 and reads as it did; a record written again shares.
func TestSchema2Upgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := sweepRecs(2, []string{"/bin/echo", "a"}, []string{"HOME=/"})
	err = db.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucket(bucketMeta)
		if _, err := tx.CreateBucket(bucketHome); err != nil {
			return err
		}
		for _, r := range recs {
			if err := put(tx, bucketHome, r.ID, r); err != nil {
				return err
			}
		}
		return m.Put(keySchema, []byte("2"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Records()
	if err != nil || len(got) != 2 || !slices.Equal(got[1].Argv, recs[1].Argv) || !slices.Equal(got[1].Env, recs[1].Env) {
		t.Fatalf("version 2's records read as %+v, %v", got, err)
	}
	if err := s.PutRecords(got...); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Records(); err != nil || len(again) != 2 || !slices.Equal(again[0].Argv, recs[0].Argv) {
		t.Fatalf("written again: %+v, %v", again, err)
	}
}

// roam ps lists a KiB of each command line at most, and says when it cut.
func TestPSArgv(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		cut  bool
	}{
		{[]string{"/bin/true"}, false},
		{[]string{"/bin/echo", strings.Repeat("z", MaxPSCmd)}, true},
		{slices.Repeat([]string{"ab"}, MaxPSCmd), true},
		{[]string{strings.Repeat("q", MaxPSCmd)}, false},
	} {
		got, cut := PSArgv(tc.argv)
		if cut != tc.cut || len(strings.Join(got, " ")) > MaxPSCmd || !strings.HasPrefix(strings.Join(tc.argv, " "), strings.Join(got, " ")) {
			t.Errorf("PSArgv of %d strings: %d strings, %d bytes, cut %v", len(tc.argv), len(got), len(strings.Join(got, " ")), cut)
		}
	}
}
