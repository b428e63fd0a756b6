// Package jobtable is the agent's job table: the records of the jobs
// whose home is this node and of the jobs running on it, in memory and in
// the bbolt store. It owns its lock: the other concerns call its methods,
// each one step done under the lock, and get copies, never the table's own
// records. It decides nothing about the jobs (the relay, the migrations and
// the restarts do) and runs no process.
package jobtable

import (
	"os"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/agent/spool"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// Table is the job manager's in-memory state; the bbolt store is the truth
// that survives a restart.
type Table struct {
	mu    lockorder.Mutex
	store *job.Store // the records' and local jobs' bbolt table
	// spools are the home jobs' output, cut back by a restart's consent
	// under mu (doc.go's order: jobs.mu, then a spool's lock).
	spools *spool.Spools
	home   map[string]*job.Record   // jobs whose home is this node
	local  map[string]*Local        // jobs running on this node
	wake   map[string]chan struct{} // closed when a home job gets news
	heard  map[string]time.Time     // node -> its last update to this home
	kick   chan struct{}
	// release is kicked when room may have come for the home's pending
	// jobs (KickRelease); waiting is why the queue's last round left
	// them pending, by sweep or lone job, and forRoom whether some wait
	// for room (queue.go).
	release chan struct{}
	waiting map[string]string
	forRoom bool
	// restarting are the jobs this home consented to restart, with their
	// record from before, until the run's end is known (package
	// checkpoints); endedRuns the runs it decided ended, never consented
	// again.
	restarting map[string]*reopen.Mark
	endedRuns  reopen.Ended
	// reserved are the memory requests, in bytes, of the jobs that are
	// starting or arriving here and are not local jobs yet (mem.go).
	reserved map[string]int64
	// ledger is what each user's home records cost (budget.go).
	ledger job.Ledger
}

// wakeReaders wakes the readers waiting for news of home job id (Output).
// mu held.
func (j *Table) wakeReaders(id string) {
	if ch := j.wake[id]; ch != nil {
		close(ch)
		delete(j.wake, id)
	}
}

// putHome writes changed copies of home records to the store, then, once
// they are durable, to the table in memory; on an error neither changes.
// mu held.
func (j *Table) putHome(next map[string]*job.Record) error {
	if len(next) == 0 {
		return nil
	}
	recs := make([]job.Record, 0, len(next))
	for _, r := range next {
		recs = append(recs, *r)
	}
	if err := j.store.PutRecords(recs...); err != nil {
		return err
	}
	for id, r := range next {
		*j.home[id] = *r
	}
	return nil
}

// newsOf is the record update u changes: its copy in next, or a new copy
// of the home's. known and stale say what takeOutput found of the job
// (known: it had a record; stale: u is of an older incarnation). When u
// is news of no record, refused is the answer. mu held.
func (j *Table) newsOf(u relay.Update, known, stale bool, next map[string]*job.Record) (rec *job.Record, refused *relay.Ack) {
	if rec := next[u.ID]; rec != nil {
		return rec, nil
	}
	cur := j.home[u.ID]
	if cur == nil || !known {
		// Forgotten after a failed start: nobody will read it. A job
		// purged while its output was written is gone as well. Only a
		// job's home can say it has no record of it: news that reached
		// another node (a stale home address) is not acknowledged at
		// all, so that its node keeps the job and sends it again, to its
		// home (TakeNews).
		return nil, &relay.Ack{Done: true, Gone: true}
	}
	if stale || u.Inc < cur.Inc || cur.State == job.StatePending {
		// A copy of an incarnation before the job's restart from a
		// checkpoint (its node was cut off, not dead), or of a start the
		// home took back (pending again): it is ended, and nothing it
		// says is taken.
		return nil, &relay.Ack{Done: true, Gone: true}
	}
	c := *cur
	return &c, nil
}

// Count is how many jobs run here.
func (j *Table) Count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.local)
}

// Owner is the Owner of a job running here, nil when unknown (a record
// of an older roam says uid 0: root's eyes only).
func (j *Table) Owner(id string) *uint32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		uid := lj.Rec.UID
		return &uid
	}
	return nil
}

// HomeRecord is the record of a job whose home is this node.
func (j *Table) HomeRecord(id string) (job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.home[id]; r != nil {
		return *r, nil
	}
	return job.Record{}, errkind.New(peer.ErrNotFound, "unknown job %s", id)
}

// Local is a job running on this node.
type Local struct {
	Rec    job.Local
	Stdin  *os.File // nil when the job takes no stdin or after a restart
	AckOut int64    // what the home node has; -1 until it told us
	AckErr int64
	// Migrating: a migration is moving it; the push loop leaves it alone.
	Migrating bool
	// lastTry is when a policy last tried to move it and failed;
	// unmovable says why, when the reason will not go away (it pins).
	lastTry   time.Time
	Unmovable string
	// lastPush is when news of it last went to its home (see AliveEvery).
	lastPush time.Time
	// sizeChecked is when its spool was last held against
	// limits.output_bytes; why says why this node killed it, if it did.
	sizeChecked time.Time
	why         string
	// rootSignal is the last signal root sent it (roam kill): if it
	// ends, root ended it.
	rootSignal int
	// ArrivedAt is when it started or came here; lastCkpt when its last
	// periodic checkpoint here began; ckptJob its record's part a
	// checkpoint keeps, once asked of its home.
	ArrivedAt time.Time
	lastCkpt  time.Time
	CkptJob   *migrate.CheckpointJob
}

// Refs copies what a round reads of the jobs running here, and their
// ids.
func (j *Table) Refs() ([]JobRef, []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	refs := make([]JobRef, 0, len(j.local))
	here := make([]string, 0, len(j.local))
	for id, lj := range j.local {
		refs = append(refs, JobRef{lj.Rec, lj.Unmovable, lj.Migrating, lj.Rec.Done})
		here = append(here, id)
	}
	return refs, here
}

// Inits are the roam-init processes of the jobs running here (pid ->
// start time in clock ticks).
func (j *Table) Inits() map[int]uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	inits := make(map[int]uint64, len(j.local))
	for _, lj := range j.local {
		if lj.Rec.PID > 0 {
			inits[lj.Rec.PID] = lj.Rec.StartTix
		}
	}
	return inits
}

// New is an empty job table over store and spools; its lock has rank
// (the agent's doc.go gives the order).
func New(store *job.Store, spools *spool.Spools, rank lockorder.Rank) *Table {
	j := &Table{store: store, spools: spools, home: map[string]*job.Record{}, local: map[string]*Local{}, wake: map[string]chan struct{}{},
		heard: map[string]time.Time{}, kick: make(chan struct{}, 1), release: make(chan struct{}, 1), restarting: map[string]*reopen.Mark{}, ledger: job.NewLedger()}
	j.mu.Init(rank, "jobs.mu")
	return j
}

// Reset empties the table in memory, in place and under its lock (a
// goroutine may hold the lock still), and puts it over store and spools:
// the in-process fuzz harness starts each input so.
func (j *Table) Reset(store *job.Store, spools *spool.Spools) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.store, j.spools = store, spools
	j.home, j.local, j.wake, j.heard = map[string]*job.Record{}, map[string]*Local{}, map[string]chan struct{}{}, map[string]time.Time{}
	select {
	case <-j.kick:
	default:
	}
	j.restarting, j.endedRuns = map[string]*reopen.Mark{}, reopen.Ended{}
	j.ledger = job.NewLedger()
}

// Load puts what the store holds into the table, at the agent's start:
// the home records, and the local jobs, whose homes are asked what they
// have (ackOut -1) before any output is sent.
func (j *Table) Load(recs []job.Record, locals []job.Local, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range recs {
		j.home[recs[i].ID] = &recs[i]
		j.ledger.Add(&recs[i], nil)
	}
	for _, l := range locals {
		j.local[l.ID] = &Local{Rec: l, AckOut: -1, AckErr: -1, ArrivedAt: now}
	}
}

// KickPush wakes the push loop out of turn; kicked is what it waits on.
func (j *Table) KickPush() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

func (j *Table) Kicked() <-chan struct{} { return j.kick }

// UserJobs counts uid's home jobs that are live and lists those that
// ended.
func (j *Table) UserJobs(uid uint32) (live int, ended []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for id, r := range j.home {
		switch {
		case r.UID != uid:
		case r.Over():
			ended = append(ended, id)
		default:
			live++
		}
	}
	return live, ended
}

// AddHome puts new home records in the table and the store, unless they
// would pass their user's records budget (over refuses: an ErrLimit
// error then). When one's id is another record's (the store's job
// sequence behind its records), it puts none and returns that id.
func (j *Table) AddHome(recs []job.Record, over func(uid uint32, have, more int64) error) (taken string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range recs {
		if j.home[r.ID] != nil {
			return r.ID, nil
		}
	}
	if err := j.ledger.Admit(recs, over); err != nil {
		return "", errkind.New(peer.ErrLimit, "%v", err)
	}
	if err := j.store.PutRecords(recs...); err != nil {
		return "", err
	}
	for _, r := range recs {
		j.home[r.ID] = &r
		j.ledger.Add(&r, nil)
	}
	return "", nil
}

// ForgetHome removes the records of a start that failed, and their
// spools.
func (j *Table) ForgetHome(recs []job.Record) {
	j.mu.Lock()
	for _, r := range recs {
		if cur := j.home[r.ID]; cur != nil {
			j.ledger.Drop(cur)
			delete(j.home, r.ID)
		}
	}
	_ = j.store.DeleteRecords(recs)
	j.mu.Unlock()
	for _, r := range recs {
		j.spools.Remove(r.ID)
	}
}

// AddLocals writes jobs started here to the store and puts them in the
// table, each with its stdin pipe (nil for none). When the store refuses
// them, they are not put in the table: the caller ends them (an agent
// restarted would not know them, and they would run untracked).
func (j *Table) AddLocals(locals []job.Local, stdins []*os.File, now time.Time) error {
	if err := j.store.PutLocals(locals...); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, l := range locals {
		j.local[l.ID] = &Local{Rec: l, Stdin: stdins[i], ArrivedAt: now}
		delete(j.reserved, l.ID) // its request counts as a local job's now
	}
	return nil
}

// Ended copies the home records that Ended: uid's, or every user's.
func (j *Table) Ended(uid uint32, all bool) []job.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []job.Record
	for _, r := range j.home {
		if r.Over() && (all || r.UID == uid) {
			out = append(out, *r)
		}
	}
	return out
}

// RemoveEnded removes these home records, those that have ended (a job
// that runs is never removed), and returns them. The store first: a
// record removed from memory but not from disk would come back at the
// next start; the other way round, nothing.
func (j *Table) RemoveEnded(ids []string) ([]job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var gone []job.Record
	for _, id := range ids {
		if r := j.home[id]; r != nil && r.Over() {
			gone = append(gone, *r)
		}
	}
	if err := j.store.DeleteRecords(gone); err != nil {
		return nil, err
	}
	for _, r := range gone {
		j.ledger.Drop(&r)
		delete(j.home, r.ID)
	}
	return gone, nil
}

// Busy counts the jobs running here and the home jobs running, starting
// anywhere or pending here: a node leaves only once both are none.
func (j *Table) Busy() (here, homed int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.home {
		if r.State == job.StateRunning || r.State == job.StateStarting || r.State == job.StatePending {
			homed++
		}
	}
	return len(j.local), homed
}

// HeardFrom is when each node last sent news to this home.
func (j *Table) HeardFrom() map[string]time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]time.Time, len(j.heard))
	for n, t := range j.heard {
		out[n] = t
	}
	return out
}

// RunningNodes are the nodes the running home jobs run on: the nodes
// MarkLost asks about.
func (j *Table) RunningNodes() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	seen := map[string]bool{}
	var nodes []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	for _, r := range j.home {
		if r.State == job.StateRunning {
			add(r.Node)
		}
	}
	return nodes
}

// MarkLost marks lost every running home job whose node dead has as dead,
// unless it is being restarted or will be restarted from its newest
// checkpoint (again: kept on another node, which may only look dead: the
// restart's tries wait for it, reopen.Restartable). A node
// dead does not list (one that a record took since RunningNodes) is
// taken as alive, until the next sweep. The lost records are written
// under the lock, as the relay's updates are: a later revival or exit
// cannot be written over by this older state.
func (j *Table) MarkLost(now time.Time, dead map[string]bool) (lost, again []job.Record, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for id, r := range j.home {
		switch {
		case r.State != job.StateRunning || !dead[r.Node] || j.restarting[id] != nil:
		case reopen.Restartable(r.Newest, r.Node):
			again = append(again, *r)
		default:
			c := *r
			c.State, c.LostAt = job.StateLost, now
			next[id] = &c
			lost = append(lost, c)
		}
	}
	if err := j.putHome(next); err != nil {
		return nil, again, err
	}
	for id, r := range next {
		j.wakeReaders(id)
		j.kickIfSweep(r)
	}
	return lost, again, nil
}

// SetUnmovable notes why a job here cannot move (a pin a policy's move
// found), so that no policy tries it again.
func (j *Table) SetUnmovable(id, reason string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		lj.Unmovable = reason
	}
}

// ReleaseHold hands a job here placed by hand back to the policies.
func (j *Table) ReleaseHold(id string) (found bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil {
		return false, nil
	}
	if lj.Rec.Hold == migrate.HoldManual {
		lj.Rec.Hold = migrate.HoldNone
	}
	lj.Unmovable = ""
	return true, j.store.PutLocals(lj.Rec)
}

// PsView copies what `roam ps` shows of this node: the home records
// (without their environments, which ps does not show and may be
// megabytes a job, and with their argv cut to what ps lists,
// job.PSArgv), the ids of those cut, and the jobs running here.
func (j *Table) PsView() ([]job.Record, []string, []job.Local) {
	j.mu.Lock()
	defer j.mu.Unlock()
	recs := make([]job.Record, 0, len(j.home))
	var cut []string
	for _, r := range j.home {
		c := *r
		c.Env = nil
		if argv, ok := job.PSArgv(c.Argv); ok {
			c.Argv = argv
			cut = append(cut, c.ID)
		}
		recs = append(recs, c)
	}
	locals := make([]job.Local, 0, len(j.local))
	for _, lj := range j.local {
		locals = append(locals, lj.Rec)
	}
	return recs, cut, locals
}

// JobRef is what a scheduling round reads of a job running here.
type JobRef struct {
	Rec             job.Local
	Unmovable       string
	Migrating, Done bool
}
