// Package moves is the owner of a node's migrations in flight: those
// coming to it (by migration id), where each job that left it went, the
// page sinks taking streamed dumps' pages, the lazy dumps serving pages,
// and what each coming migration's check found of the job's files, until
// its restore compares the restored job's with them. The agent's drivers
// of migrate.Source and migrate.Dest change them only through its
// methods, each under the table's lock.
//
// Its lock is a leaf: nothing is taken while it is held, and no method
// calls out with it held. The job table's lock may be held when it is
// taken: a job's leaving and arriving change the job table and where the
// job went as one step (the agent's doc.go has the order). It does no I/O
// under its lock (a dropped sink's directory is removed after), starts no
// goroutine, and never imports roam/internal/agent: the coming
// migrations and the lazy dumps are the agent's types, to the table only
// what Arrival says of them.
package moves

import (
	"net"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// Arrival is a migration coming to this node as the table needs it: its
// job, and whether its machine has ended (it is then forgotten soon).
type Arrival interface {
	comparable
	Job() string
	Ended() bool
}

// Table is one node's migrations in flight; A is a coming migration, L a
// lazy dump serving pages.
type Table[A Arrival, L any] struct {
	self string // the node, for the errors' text
	mu   lockorder.Mutex
	// in are the migrations coming to this node, by id.
	in map[string]A
	// movedTo says where a job that left this node went, so a signal or
	// stdin sent here by a stale record still arrives.
	movedTo map[string]string
	// lazy are the lazy dumps serving pages, by migration id.
	lazy map[string]L
	// sinks are the page servers taking streamed dumps' pages, by
	// migration id.
	sinks map[string]*Sink
	// checked are what each coming migration's check found, by id.
	checked map[string]checked
	// prunedAt is when the ledger was last pruned (PruneDue).
	prunedAt time.Time
}

// New is the empty table of node self, its lock of the given rank.
func New[A Arrival, L any](self string, rank lockorder.Rank) *Table[A, L] {
	t := &Table[A, L]{self: self}
	t.mu.Init(rank, "moves.mu")
	t.Clear()
	return t
}

// Clear forgets everything: for a test that puts an agent back between
// inputs (no migration may be in flight).
func (t *Table[A, L]) Clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.in, t.movedTo, t.lazy = map[string]A{}, map[string]string{}, map[string]L{}
	t.sinks, t.checked, t.prunedAt = map[string]*Sink{}, map[string]checked{}, time.Time{}
}

// known is the error for a migration id this node has seen already.
func (t *Table[A, L]) known(mid string) error {
	return errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", mid, t.self)
}

// ---- migrations coming here ----

// Arrive lists a as migration mid coming here; a second of one id is
// refused.
func (t *Table[A, L]) Arrive(mid string, a A) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.in[mid]; ok {
		return t.known(mid)
	}
	t.in[mid] = a
	return nil
}

// Adopt lists a as migration mid coming here, unless one is listed: it
// returns the listed one, and whether that is a.
func (t *Table[A, L]) Adopt(mid string, a A) (A, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.in[mid]; ok {
		return old, old == a
	}
	t.in[mid] = a
	return a, true
}

// Arrival is migration mid coming here, if it is listed.
func (t *Table[A, L]) Arrival(mid string) (A, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.in[mid]
	return a, ok
}

// Ended forgets a, migration mid, if it is still the one listed.
func (t *Table[A, L]) Ended(mid string, a A) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.in[mid] == a {
		delete(t.in, mid)
	}
}

// Arriving says whether a migration of job other than mid is coming here
// and has not ended.
func (t *Table[A, L]) Arriving(job, mid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for m, a := range t.in {
		if m != mid && a.Job() == job && !a.Ended() {
			return true
		}
	}
	return false
}

// Arrivals are the migrations listed as coming here.
func (t *Table[A, L]) Arrivals() []A {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]A, 0, len(t.in))
	for _, a := range t.in {
		out = append(out, a)
	}
	return out
}

// ---- where jobs went ----

// Left records that job left this node for node to.
func (t *Table[A, L]) Left(job, to string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.movedTo[job] = to
}

// MovedTo is where job went when it left this node last ("": it did not,
// or it is back).
func (t *Table[A, L]) MovedTo(job string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.movedTo[job]
}

// Back forgets where job went: it runs here again.
func (t *Table[A, L]) Back(job string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.movedTo, job)
}

// ---- lazy dumps ----

// ServeLazy lists l as migration mid's lazy dump serving pages here.
func (t *Table[A, L]) ServeLazy(mid string, l L) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lazy[mid] = l
}

// Lazy is migration mid's lazy dump, if one serves pages here.
func (t *Table[A, L]) Lazy(mid string) (L, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.lazy[mid]
	return l, ok
}

// EndLazy forgets migration mid's lazy dump.
func (t *Table[A, L]) EndLazy(mid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.lazy, mid)
}

// Serving is how many page servers (sinks and lazy dumps) are listed.
func (t *Table[A, L]) Serving() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sinks) + len(t.lazy)
}

// ---- the ledger's pruning ----

// PruneDue says whether the ledger is to be pruned now, at most once
// every every; a true answer counts as the pruning.
func (t *Table[A, L]) PruneDue(now time.Time, every time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.prunedAt) < every {
		return false
	}
	t.prunedAt = now
	return true
}

// ---- page sinks ----

// OpenSink lists s as its migration's page sink; a second of one
// migration is refused (the caller stops it).
func (t *Table[A, L]) OpenSink(s *Sink) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.sinks[s.mid]; dup {
		return errkind.New(peer.ErrBadRequest, "page sink for migration %s exists", s.mid)
	}
	t.sinks[s.mid] = s
	return nil
}

// Sink is migration mid's page sink, nil when none is listed.
func (t *Table[A, L]) Sink(mid string) *Sink {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sinks[mid]
}

// TakeSinkConn gives migration mid's sink's socket to the one connection
// that carries the dump's pages: nil to any other, or with no sink.
func (t *Table[A, L]) TakeSinkConn(mid string) net.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sinks[mid]
	if s == nil || s.conn == nil {
		return nil
	}
	c := s.conn
	s.conn = nil
	s.connected.Store(true)
	return c
}

// ClaimSink takes migration mid's sink off the table for its restore:
// nil when none is listed.
func (t *Table[A, L]) ClaimSink(mid string) *Sink {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sinks[mid]
	delete(t.sinks, mid)
	return s
}

// DropSink stops and removes migration mid's sink, if one is listed.
func (t *Table[A, L]) DropSink(mid string) {
	if s := t.ClaimSink(mid); s != nil {
		s.drop()
	}
}

// ---- what the checks found ----

// checked is what a migration's check found at each of the job's paths
// on this node, and when.
type checked struct {
	at    time.Time
	job   string
	files map[string]migrate.OpenFile
}

// MaxChecked bounds what this node keeps from the checks of migrations
// still to come: their paths, and one for each check. The oldest checks
// go first; a migration whose check went finds none at its restore, and
// its files in shared directories are then refused (the job runs on at
// its source). A check is kept for CheckedKeep at most: a migration that
// never came (its source gave up) leaves nothing for long.
const (
	MaxChecked  = 4 * migrate.MaxOpenFiles
	CheckedKeep = 10 * time.Minute
)

// KeepChecked keeps what the check of migration mid (of job) found, for
// its restore, within MaxChecked and CheckedKeep. A second check of a
// migration it keeps one of is refused: it would replace the first's
// findings.
func (t *Table[A, L]) KeepChecked(mid, job string, files map[string]migrate.OpenFile, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.checked[mid]; ok {
		return t.known(mid)
	}
	t.checked[mid] = checked{at: now, job: job, files: files}
	for {
		n, oldest := 0, ""
		for m, c := range t.checked {
			if now.Sub(c.at) > CheckedKeep {
				delete(t.checked, m)
				continue
			}
			n += 1 + len(c.files)
			if m != mid && (oldest == "" || c.at.Before(t.checked[oldest].at)) {
				oldest = m
			}
		}
		if n <= MaxChecked || oldest == "" {
			return nil
		}
		delete(t.checked, oldest)
	}
}

// AddChecked adds what a late check of migration mid (of job) found to
// what its first check found; it fails when there is no first check kept,
// or when the two together are more than twice what one may hold.
func (t *Table[A, L]) AddChecked(mid, job string, files map[string]migrate.OpenFile) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.checked[mid]
	if !ok || c.job != job {
		return errkind.New(peer.ErrBadRequest, "late check of migration %s of job %s: node %s has no check of it", mid, job, t.self)
	}
	if len(c.files)+len(files) > 2*migrate.MaxOpenFiles {
		return errkind.New(peer.ErrBadRequest, "late check of migration %s of job %s: %d files more", mid, job, len(files))
	}
	for p, f := range files {
		c.files[p] = f
	}
	return nil
}

// TakeChecked returns and forgets what the check of migration mid found,
// if it was of job (nil: nothing kept).
func (t *Table[A, L]) TakeChecked(mid, job string) map[string]migrate.OpenFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.checked[mid]
	delete(t.checked, mid)
	if !ok || c.job != job {
		return nil
	}
	return c.files
}
