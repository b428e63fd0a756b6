// Package job is the job manager's state and mechanics: the job table that
// survives an agent restart (bbolt), launching a job's process in its own
// namespaces on this node, and the spool files that keep its output on the
// node that runs it until the home node has it.
//
// It decides nothing about placement (that is package sched) and speaks no
// network protocol (that is the agent).
package job

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/migrate"
	"roam/internal/resources"
)

// The bbolt schema, version 3:
//
//	meta/schema   -> "3" (schemaVersion)
//	meta/seq      -> uint64 big-endian: the last job sequence number handed
//	                 out; job ids are HOMENODE.SEQ and never reused
//	meta/policy   -> LoadedPolicy (JSON): the policy last loaded with roam
//	                 policy load, run again at start (no version change:
//	                 an older roam ignores it)
//	meta/draining -> the byte 1 while the node is drained (roam node drain)
//	home/<id>     -> Record (JSON): jobs whose home node is this node, a
//	                 sweep's pending ones too (state "pending", no node
//	                 yet: they start after a restart as before it). The
//	                 sweep and usage fields came without a version
//	                 change: an older roam reads them as none. A sweep's
//	                 job's record shares its sweep's argv and first
//	                 strings of env (argv_shared, env_shared: since
//	                 version 3; shared.go)
//	sweeps/<sweep>/"\x00args" -> Args (JSON): a sweep's shared arguments
//	sweeps/<sweep>/<id> -> empty: a job of the sweep whose record is kept;
//	                 the sweep's bucket goes with the last (since
//	                 version 3)
//	local/<id>    -> Local (JSON): jobs running on this node, whatever
//	                 their home
//	migout/<mid>  -> migrate.Record (JSON): migrations from this node, with
//	                 the source's decision (since version 2)
//	migin/<mid>   -> migrate.InRecord (JSON): migrations to this node
//	                 (since version 2)
//	corrupt/<bucket>/<key> -> the bytes of a value that did not decode,
//	                 set aside by SetAsideCorrupt (made when first needed;
//	                 no version change: nothing else reads it)
//
// Upgrades: a store with an older schema is upgraded in Open, step by step
// (1 -> 2: the two migration buckets, created empty; 2 -> 3: sweeps/,
// created empty: a record of version 2 keeps its own argv and env, and
// reads as it did, until it is written again, shared); a newer one is
// refused. A version 2 roam refuses a version 3 store.
const schemaVersion = "3"

var (
	bucketMeta   = []byte("meta")
	bucketHome   = []byte("home")
	bucketLocal  = []byte("local")
	bucketOut    = []byte("migout")
	bucketIn     = []byte("migin")
	bucketBad    = []byte("corrupt")
	bucketSweeps = []byte("sweeps")
	keySchema    = []byte("schema")
	keySeq       = []byte("seq")
	keyPolicy    = []byte("policy")
	keyDraining  = []byte("draining")
)

// States of a job: the API's, which shows them unchanged.
const (
	StateStarting = api.StateStarting
	StatePending  = api.StatePending
	StateRunning  = api.StateRunning
	StateFinished = api.StateFinished
	StateLost     = api.StateLost
)

// Record is the home node's record of a job.
type Record struct {
	ID     string   `json:"id"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	User   string   `json:"user"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	Home   string   `json:"home"`
	Node   string   `json:"node"` // current node
	// Stdin says whether the job reads the user's stdin.
	Stdin bool `json:"stdin"`
	Pin   bool `json:"pin,omitempty"`
	// Slurm is the Slurm job whose allocation the job serves (its
	// SLURM_JOB_ID, checked at its home): it runs in that job's extern
	// step on whatever node it runs, and only on the nodes of Within,
	// the allocation's members.
	Slurm    string   `json:"slurm,omitempty"`
	Within   []string `json:"within,omitempty"`
	State    string   `json:"state"`
	ExitCode *int     `json:"exit_code,omitempty"`
	// Started is when the job began to run on its node, by this home's
	// clock (the node's answer says how long before it each job
	// started); until that answer, when it was placed (or submitted,
	// pending).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// LostAt is when the job was marked lost: membership declared its
	// node dead. A lost job whose node comes back and still runs it is
	// running again, and LostAt is cleared.
	LostAt     time.Time `json:"lost_at,omitzero"`
	Migrations int       `json:"migrations"`
	// MigrationLog is every migration tried, the failed ones included.
	MigrationLog []Migration `json:"migration_log,omitempty"`
	// PinReason says why the job cannot migrate, once a migration found out.
	PinReason string `json:"pin_reason,omitempty"`
	// EndReason says why roam ended the job, when it did (a limit).
	EndReason string `json:"end_reason,omitempty"`
	// OutputCut says what of its output its home does not have, when
	// its node dropped some (relay.Update.Dropped).
	OutputCut string `json:"output_cut,omitempty"`
	// Manual is set by a manual `roam migrate`: the job stays where the
	// user put it until `roam migrate JOBID auto`.
	Manual bool `json:"manual,omitempty"`
	// Group is the id of the `roam run` that started it, to attach to all
	// its jobs at once.
	Group string `json:"group"`
	// Inc is its incarnation: one more at each restart from a checkpoint.
	// News from a copy of an older one is refused and that copy ended.
	Inc int `json:"inc,omitempty"`
	// CheckpointEvery is its periodic checkpoint interval (0: none).
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	// Req is its resource request (roam run --cpus, --mem), which every
	// node it runs on enforces; zero in a record of an older roam.
	Req resources.Request `json:"req,omitzero"`
	// Newest is its newest periodic checkpoint, kept on Newest.StoredOn.
	Newest *api.Checkpoint `json:"newest,omitempty"`
	// Checkpoints are its checkpoints tried, the newest last (at most
	// MaxMigrationLog); Restarts its restarts.
	Checkpoints []api.Checkpoint `json:"checkpoints,omitempty"`
	Restarts    []api.Restart    `json:"restarts,omitempty"`
	// Sweep is its place in its sweep, zero for a job of none.
	Sweep SweepPart `json:"sweep,omitzero"`
	// Used is what it used, kept once it ended (api.Accounting), and
	// while it waits preempted (what it had before).
	Used Usage `json:"used,omitzero"`
	// Preempted is when its home's queue preempted it (package queue,
	// Preempt): checkpointed, ended on its node (EndPreempted) and
	// pending again until a restart from that checkpoint runs it; zero
	// if never. It stays once it runs again: a job is preempted once.
	Preempted time.Time `json:"preempted,omitzero"`
}

// EndPreempted is why a node ends a job its home's queue preempted,
// once its checkpoint is kept (the checkpoint's why, and its update's):
// the home makes the job pending again, not ended.
const EndPreempted = "preempted by its home's queue: checkpointed, to run again from there"

// SweepPart is a job's place in its sweep (package sweep): the sweep's
// id, the job's index, and the sweep's settings, which every job of it
// carries (a sweep is its jobs).
type SweepPart struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
	// Count is the sweep's -n (ROAM_COUNT); a rerun's is its original's.
	Count int `json:"count"`
	// MaxRunning bounds its jobs running at once (0: none).
	MaxRunning int `json:"max_running,omitempty"`
	// On is the node its jobs were asked to run on (run --on), for those
	// that start later.
	On string `json:"on,omitempty"`
	// Output and Error are its --output and --error patterns.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// FileError is why the job's output could not be written to its
	// file (it is in its spool then, for roam logs).
	FileError string `json:"file_error,omitempty"`
	// RerunOf is the sweep it reruns.
	RerunOf string `json:"rerun_of,omitempty"`
}

// Usage is what a job used, as its last node's cgroup counted it when it
// ended: CPU seconds over every node it ran on (job.Local.CPUBefore
// carried on), and the highest peak memory of those nodes' cgroups.
type Usage struct {
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	PeakMB     float64 `json:"peak_mb,omitempty"`
}

// Migration is one migration attempt, as the job record keeps it; the
// type is the API's, which shows it unchanged.
type Migration = api.Migration

// MaxMigrationLog bounds a record's migration log (the oldest go first).
const MaxMigrationLog = 50

// Local is a node's record of a job running on it.
type Local struct {
	ID   string `json:"id"`
	Home string `json:"home"`
	// HomeAddr is the home agent's peer address, to push output to.
	HomeAddr string `json:"home_addr"`
	// UID, GID and Groups are the job's owner's: what its processes must
	// run as, and who may see its events. Zero in a record of an older
	// roam: such a job's events are shown to root only.
	UID      uint32   `json:"uid,omitempty"`
	GID      uint32   `json:"gid,omitempty"`
	Groups   []uint32 `json:"groups,omitempty"`
	PID      int      `json:"pid"`       // roam-init's pid on this host
	StartTix uint64   `json:"start_tix"` // its start time, to tell a reused pid
	Dir      string   `json:"dir"`       // spool directory
	// Done is set once the home node has the exit status and all output.
	Done bool `json:"done"`
	// Started is when the job started (on its first node), for the
	// scheduler's minimum age.
	Started time.Time `json:"started,omitempty"`
	// Hold says why no policy may move the job (migrate.HoldPin,
	// HoldManual), or is HoldNone when policies may.
	Hold migrate.Hold `json:"hold,omitempty"`
	// Moves and LastMoved are its migrations so far, for hysteresis.
	Moves     int       `json:"moves,omitempty"`
	LastMoved time.Time `json:"last_moved,omitempty"`
	// Inc is the incarnation of the copy running here (Record.Inc).
	Inc int `json:"inc,omitempty"`
	// CheckpointEvery is its periodic checkpoint interval (0: none).
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	// Req is its resource request (Record.Req): its cgroup's limits
	// here, and the memory it holds of this node's for jobs.
	Req resources.Request `json:"req,omitzero"`
	// CPUBefore is the CPU time, in seconds, the job had on the nodes it
	// ran on before this copy started here (from a move or a restart):
	// with what it has had here, its attained service, which the
	// scheduler's turns even out (sched.ProblemTurn).
	CPUBefore float64 `json:"cpu_before,omitempty"`
	// CPUBase is what the job's count here (its cgroup's, or its process
	// tree's) said when this copy came: a job that comes back to a node
	// before its old cgroup there is removed finds that cgroup's old count
	// in it, which it had before and carries in CPUBefore already.
	CPUBase float64 `json:"cpu_base,omitempty"`
	// PeakBefore is the highest peak memory, in MiB, of the job's cgroups
	// on the nodes it ran on before this copy (migrate.Header.PeakMB).
	PeakBefore float64 `json:"peak_before,omitempty"`
	// CPU is what the CPU the job's program started on offers: the copy
	// runs only where a CPU has as much (cpufeat), as its program may
	// have picked code for any of it; a move or a restart keeps it. Zero
	// in a record of an older roam: unknown, and every node fits.
	CPU cpufeat.Set `json:"cpu,omitzero"`
	// LeaseCap, for a copy that came here by a migration its home has not
	// taken news of from here yet, is the newest its lease may be: when
	// its source last reached the home (migrate.Header.LeaseAge). Zero
	// once the home took news of it from here (fencing.Job.Cap).
	LeaseCap time.Time `json:"lease_cap,omitzero"`
	// Checkpointed: a checkpoint file of it that its owner holds (roam
	// checkpoint), or that it was restarted from, could restart it, so
	// it holds a lease here as a job with periodic checkpoints does
	// (package fence). It stays so wherever it moves.
	Checkpointed bool `json:"checkpointed,omitempty"`
	// Slurm and Within are the Slurm job it serves and the nodes it may
	// run on (Record's): no policy moves it elsewhere, and a node
	// restores it into that job's extern step.
	Slurm  string   `json:"slurm,omitempty"`
	Within []string `json:"within,omitempty"`
}

// Attained is the job's CPU time on every node it ran on, given cpu, the
// count here: what it grew by since this copy came (CPUBase), after what
// it had before, bounded as a header's.
func (l Local) Attained(cpu float64) float64 {
	return min(max(l.CPUBefore, 0)+max(cpu-l.CPUBase, 0), migrate.MaxCPUBefore)
}

// Over reports whether the job is over (finished or lost).
func (r Record) Over() bool { return r.State == StateFinished || r.State == StateLost }

// Store is the job table.
type Store struct {
	db *bolt.DB
	// shared are the Args of the sweeps whose records the agent holds:
	// read once, shared by their records in memory.
	mu     sync.Mutex
	shared map[string]*Args
}

// ErrSchema means the store was written by a newer roam.
var ErrSchema = errors.New("job store: unknown schema version")

// Open opens (or creates) the store at path.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("job store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketHome, bucketLocal, bucketOut, bucketIn, bucketSweeps} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		switch v := m.Get(keySchema); {
		case v == nil:
			return m.Put(keySchema, []byte(schemaVersion))
		case string(v) == schemaVersion:
			return nil
		case string(v) == "1" || string(v) == "2":
			// The migration buckets (2) and sweeps/ (3) were created
			// above; version 2's records read as they are.
			return m.Put(keySchema, []byte(schemaVersion))
		default:
			return fmt.Errorf("%w %q (this roam knows %s)", ErrSchema, v, schemaVersion)
		}
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, shared: map[string]*Args{}}, nil
}

// LoadedPolicy is the scheduling policy last loaded with `roam policy
// load`, kept so that it outlives a restart of the whole cluster.
type LoadedPolicy struct {
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
	Version uint64    `json:"version,omitempty"`
}

// PutPolicy keeps the loaded policy.
func (s *Store) PutPolicy(p LoadedPolicy) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyPolicy, b) })
}

// Policy returns the loaded policy kept, if there is one.
func (s *Store) Policy() (LoadedPolicy, bool, error) {
	var p LoadedPolicy
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta).Get(keyPolicy)
		if b == nil {
			return nil
		}
		found = true
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("job store: the kept policy: %w", err)
		}
		return nil
	})
	return p, found && err == nil, err
}

// PutDraining keeps whether this node drains (roam node drain).
func (s *Store) PutDraining(on bool) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if on {
			return tx.Bucket(bucketMeta).Put(keyDraining, []byte{1})
		}
		return tx.Bucket(bucketMeta).Delete(keyDraining)
	})
}

// Draining says whether this node was left draining.
func (s *Store) Draining() (bool, error) {
	var on bool
	err := s.db.View(func(tx *bolt.Tx) error {
		on = tx.Bucket(bucketMeta).Get(keyDraining) != nil
		return nil
	})
	return on, err
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// NextSeqs reserves n job sequence numbers and returns the first. They are
// persisted before use, so an id is never handed out twice.
func (s *Store) NextSeqs(n int) (uint64, error) {
	var first uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		var last uint64
		if v := m.Get(keySeq); len(v) == 8 {
			last = binary.BigEndian.Uint64(v)
		}
		first = last + 1
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], last+uint64(n))
		return m.Put(keySeq, b[:])
	})
	return first, err
}

// BumpSeq makes sure seq is never handed out: a job made again with its
// old id (a restart from a checkpoint at a home that no longer has its
// record) keeps the numbering unique.
func (s *Store) BumpSeq(seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if v := m.Get(keySeq); len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
			return nil
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], seq)
		return m.Put(keySeq, b[:])
	})
}

func put[T any](tx *bolt.Tx, bucket []byte, id string, v T) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(id), b)
}

func putAll[T any](s *Store, bucket []byte, items []T, id func(T) string) error {
	if len(items) == 0 {
		return nil // a transaction is a write to the disk, even empty
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, x := range items {
			if err := put(tx, bucket, id(x), x); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutRecords writes home records in one transaction.
func (s *Store) PutRecords(rs ...Record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range rs {
			if err := s.putRecord(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutLocals writes local records in one transaction.
func (s *Store) PutLocals(ls ...Local) error {
	return putAll(s, bucketLocal, ls, func(l Local) string { return l.ID })
}

// DeleteLocal forgets a local record.
func (s *Store) DeleteLocal(id string) error { return s.DeleteLocals(id) }

// DeleteLocals forgets local records in one transaction: each transaction
// is a write to the disk that the agent waits for.
func (s *Store) DeleteLocals(ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLocal)
		for _, id := range ids {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

func all[T any](s *Store, bucket []byte) ([]T, error) {
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			var x T
			// A value that does not decode is SetAsideCorrupt's to report;
			// it must not hide the others.
			if json.Unmarshal(v, &x) == nil {
				out = append(out, x)
			}
			return nil
		})
	})
	return out, err
}

// Records returns every home record (the tests' view: the agent's start
// reads them one at a time, EachRecord).
func (s *Store) Records() ([]Record, error) {
	var out []Record
	for _, live := range []bool{true, false} {
		if _, err := s.EachRecord(live, func(r Record, _ *Args) bool { out = append(out, r); return true }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Locals returns every local record.
func (s *Store) Locals() ([]Local, error) { return all[Local](s, bucketLocal) }

// DeleteRecords forgets home records (a run that failed to start).
func (s *Store) DeleteRecords(rs []Record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range rs {
			if err := s.deleteRecord(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
}
