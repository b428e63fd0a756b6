package job

// A sweep's arguments stored once: its jobs' records share its argv and
// the first strings of their environment (all of it but what roam adds
// for each job, ROAM_JOB and the like), so a run of -n 128 with 2 MiB
// of arguments keeps 2 MiB, not 256, in the store and in memory; and
// what each user's records cost, which the records budget holds
// (limits.records_bytes_per_user).

import (
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Args are a sweep's shared arguments: the argv and environment of the
// first of its jobs the store kept. Its jobs' records hold the same
// slices and strings, never copies.
type Args struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// storedRecord is a home record as the store keeps it: ArgvShared says
// its argv is its sweep's Args, EnvShared that the first so many strings
// of its environment are the Args' (Env holds the rest).
type storedRecord struct {
	Record
	ArgvShared bool `json:"argv_shared,omitempty"`
	EnvShared  int  `json:"env_shared,omitempty"`
}

// argsKey is a sweep's Args in its bucket of sweeps/; its other keys are
// its jobs', which the store keeps the Args for. It sorts before every
// job id.
var argsKey = []byte("\x00args")

// RecordOverhead is what a home record is charged beyond its arguments
// and environment: its fixed fields, its ids and times, and a share of
// its logs (each bounded: MaxMigrationLog).
const RecordOverhead = 2 << 10

// stringHeader is what a string costs in memory beyond its bytes: its
// header in the slice that holds it.
const stringHeader = 16

// StringsBytes is what a slice of strings costs in memory: each string
// and its header.
func StringsBytes(ss []string) int64 {
	n := int64(stringHeader * len(ss))
	for _, s := range ss {
		n += int64(len(s))
	}
	return n
}

// Charge is what a sweep's Args cost, once for all its jobs.
func (a *Args) Charge() int64 { return StringsBytes(a.Argv) + StringsBytes(a.Env) }

// Charge is what record r costs in memory and in the store beyond its
// sweep's Args sh (nil: it shares none): RecordOverhead, its own argv
// unless it is the sweep's, and its environment's headers and the
// strings past the part it shares.
func Charge(r *Record, sh *Args) int64 {
	n := int64(RecordOverhead + stringHeader*len(r.Env))
	if sh == nil || !sameStrings(r.Argv, sh.Argv) {
		n += StringsBytes(r.Argv)
	}
	p := 0
	if sh != nil {
		p = sharedPrefix(r.Env, sh.Env)
	}
	for _, e := range r.Env[p:] {
		n += int64(len(e))
	}
	return n
}

// sameStrings is slices.Equal, at once for two slices of one array (a
// sweep's jobs share their argv's).
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// sharedPrefix is how many first strings of env are shared's.
func sharedPrefix(env, shared []string) int {
	n := 0
	for n < len(env) && n < len(shared) && env[n] == shared[n] {
		n++
	}
	return n
}

// sweepArgs are the Args of r's sweep, made from r when the sweep has
// none yet. The store's cache keeps those of the sweeps whose records
// are in memory; tx is a write.
func (s *Store) sweepArgs(tx *bolt.Tx, r *Record) (*Args, error) {
	s.mu.Lock()
	sh := s.shared[r.Sweep.ID]
	s.mu.Unlock()
	sb, err := tx.Bucket(bucketSweeps).CreateBucketIfNotExists([]byte(r.Sweep.ID))
	if err != nil {
		return nil, err
	}
	if sh == nil {
		if v := sb.Get(argsKey); v != nil {
			sh = &Args{}
			if err := json.Unmarshal(v, sh); err != nil {
				return nil, fmt.Errorf("job store: the arguments of sweep %s: %w", r.Sweep.ID, err)
			}
		} else {
			sh = &Args{Argv: r.Argv, Env: r.Env}
			b, err := json.Marshal(sh)
			if err != nil {
				return nil, err
			}
			if err := sb.Put(argsKey, b); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		s.shared[r.Sweep.ID] = sh
		s.mu.Unlock()
	}
	// Its job is one the Args are kept for, until its record goes.
	return sh, sb.Put([]byte(r.ID), []byte{})
}

// putRecord writes home record r, its sweep's arguments apart.
func (s *Store) putRecord(tx *bolt.Tx, r Record) error {
	st := storedRecord{Record: r}
	if r.Sweep.ID != "" {
		sh, err := s.sweepArgs(tx, &r)
		if err != nil {
			return err
		}
		if sameStrings(r.Argv, sh.Argv) {
			st.Argv, st.ArgvShared = nil, true
		}
		st.EnvShared = sharedPrefix(r.Env, sh.Env)
		st.Env = r.Env[st.EnvShared:]
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketHome).Put([]byte(r.ID), b)
}

// deleteRecord forgets home record r, and its sweep's arguments with the
// last of the sweep's records.
func (s *Store) deleteRecord(tx *bolt.Tx, r Record) error {
	if err := tx.Bucket(bucketHome).Delete([]byte(r.ID)); err != nil || r.Sweep.ID == "" {
		return err
	}
	sweeps := tx.Bucket(bucketSweeps)
	sb := sweeps.Bucket([]byte(r.Sweep.ID))
	if sb == nil {
		return nil
	}
	if err := sb.Delete([]byte(r.ID)); err != nil {
		return err
	}
	c := sb.Cursor()
	k, _ := c.First()
	if string(k) == string(argsKey) {
		k, _ = c.Next()
	}
	if k != nil {
		return nil
	}
	s.mu.Lock()
	delete(s.shared, r.Sweep.ID)
	s.mu.Unlock()
	return sweeps.DeleteBucket([]byte(r.Sweep.ID))
}

// decodeRecord reads a stored home record, its sweep's arguments from
// args (which it fills from the store: the same Args for every record of
// a sweep).
func decodeRecord(tx *bolt.Tx, v []byte, args map[string]*Args) (Record, *Args, error) {
	var st storedRecord
	if err := json.Unmarshal(v, &st); err != nil {
		return Record{}, nil, err
	}
	if !st.ArgvShared && st.EnvShared == 0 {
		return st.Record, nil, nil
	}
	sh := args[st.Sweep.ID]
	if sh == nil {
		var b []byte
		if sb := tx.Bucket(bucketSweeps).Bucket([]byte(st.Sweep.ID)); sb != nil {
			b = sb.Get(argsKey)
		}
		sh = &Args{}
		if b == nil || json.Unmarshal(b, sh) != nil {
			return Record{}, nil, fmt.Errorf("the arguments of its sweep %q are missing or do not decode", st.Sweep.ID)
		}
		args[st.Sweep.ID] = sh
	}
	if st.EnvShared < 0 || st.EnvShared > len(sh.Env) {
		return Record{}, nil, fmt.Errorf("it shares %d strings of its sweep's environment of %d", st.EnvShared, len(sh.Env))
	}
	r := st.Record
	if st.ArgvShared {
		r.Argv = sh.Argv
	}
	r.Env = append(sh.Env[:st.EnvShared:st.EnvShared], st.Env...)
	return r, sh, nil
}

// checkRecord checks that a stored home record decodes, under its own
// id, and that its sweep's arguments are there when it shares them; it
// decodes no arguments of a sweep.
func checkRecord(tx *bolt.Tx, key, v []byte) error {
	var st storedRecord
	if err := json.Unmarshal(v, &st); err != nil {
		return err
	}
	if st.ID != string(key) {
		return fmt.Errorf("record of job %q under key %q", st.ID, key)
	}
	if !st.ArgvShared && st.EnvShared == 0 {
		return nil
	}
	if sb := tx.Bucket(bucketSweeps).Bucket([]byte(st.Sweep.ID)); sb == nil || sb.Get(argsKey) == nil {
		return fmt.Errorf("the arguments of its sweep %q are missing", st.Sweep.ID)
	}
	return nil
}

// recordHead is what a pass over the records reads of each before it
// decodes it (EachRecord).
type recordHead struct {
	State string `json:"state"`
}

// EachRecord hands every home record whose state live picks (live: not
// over; else over) to keep, one at a time, with its sweep's Args (nil:
// none): the agent's start holds each user's records to a budget without
// holding all of them at once. The Args of the records keep takes stay
// in the store's cache; the ids of those it refuses are returned, with
// their sweeps', for DeleteRecords.
func (s *Store) EachRecord(live bool, keep func(r Record, sh *Args) bool) ([]Record, error) {
	var refused []Record
	kept := map[string]*Args{}
	s.mu.Lock()
	args := make(map[string]*Args, len(s.shared))
	for id, sh := range s.shared {
		args[id] = sh
	}
	s.mu.Unlock()
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHome).ForEach(func(k, v []byte) error {
			var h recordHead
			if json.Unmarshal(v, &h) != nil || (h.State != StateFinished && h.State != StateLost) != live {
				return nil
			}
			r, sh, err := decodeRecord(tx, v, args)
			if err != nil {
				return nil // SetAsideCorrupt's to report
			}
			if !keep(r, sh) {
				refused = append(refused, Record{ID: r.ID, Sweep: SweepPart{ID: r.Sweep.ID}})
				if kept[r.Sweep.ID] == nil {
					delete(args, r.Sweep.ID) // held for none: not for the pass either
				}
				return nil
			}
			if sh != nil {
				kept[r.Sweep.ID] = sh
			}
			return nil
		})
	})
	s.mu.Lock()
	for id, sh := range kept {
		if s.shared[id] == nil {
			s.shared[id] = sh
		}
	}
	s.mu.Unlock()
	return refused, err
}

// MaxPSCmd bounds the command line `roam ps` lists of each job, in
// bytes: a list of 10,000 jobs with 2 MiB of arguments each would be
// 20 GiB. The whole of a job's stays at its home (`roam ps --json ID`).
const MaxPSCmd = 1 << 10

// PSArgv is what `roam ps` lists of argv: its first strings, the last
// cut, up to MaxPSCmd bytes joined, and whether any was left out.
func PSArgv(argv []string) ([]string, bool) {
	n := 0
	for i, a := range argv {
		if n+len(a) > MaxPSCmd {
			return append(argv[:i:i], a[:max(MaxPSCmd-n, 0)]), true
		}
		n += len(a) + 1 // and the space that joins it
	}
	return argv, false
}
