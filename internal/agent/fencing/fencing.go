// Package fencing is the node's side of lease-based self-fencing: when
// this node last reached each home (the send time of its last push that
// home acknowledged as news of the node that runs its jobs), the lease
// of every job here, and the stop, thaw and kill that package fence
// decides. It owns that state under a leaf lock (nothing is taken under
// it) and keeps what it knows of each home in a file of the state
// directory, so that a restarted agent does not take a job's lease for
// newer than it is. The push loop (package news) tells it of the jobs
// here and of the homes' answers; its own loop steps the leases.
package fencing

import (
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"roam/internal/fence"
	"roam/internal/job"
)

// StepEvery is how often the leases are stepped: how late past Lease or
// Kill a job is stopped or killed on a live agent, well within Margin.
const StepEvery = 200 * time.Millisecond

// Job is what the leases need of a job running here.
type Job struct {
	ID, Home string
	PID      int
	Tix      uint64
	// Fenced: its home could restart it (a checkpoint of it is kept).
	Fenced bool
	// Cap, when set, is the newest its lease may be (job.Local.LeaseCap):
	// it came here by a migration whose home, cut off from its source,
	// may count from the source's last news, not this node's reach.
	Cap time.Time
}

// Leases is the node's fencing. Safe for concurrent use.
type Leases struct {
	c     fence.Config
	procs job.Processes
	log   *slog.Logger
	path  string // the homes' reach, kept across restarts ("" none)

	mu     sync.Mutex
	reach  map[string]time.Time // home -> the send time of its last acknowledged push
	jobs   map[string]*entry
	saved  time.Time // when reach was last written
	dirty  bool
	killed map[string]bool // jobs killed by their fence
	kick   chan struct{}   // a job came: Loop wakes
	// Dumping, when set, says whether a dump of job id is under way
	// (news.Relay's dumps): the fence leaves such a job alone but for its
	// kill. Set before Loop starts.
	Dumping func(id string) bool
	// startTix is when this agent started, in clock ticks after boot: a
	// job whose roam-init started later came here after it (started,
	// migrated in, restarted here: a restored process starts anew); one
	// that started before was found here at the agent's start, and its
	// lease is as old as the file's reach.
	startTix uint64
}

type entry struct {
	job   Job
	since time.Time // when the leases first saw it
	// came: it came here after the agent's start (a migration in, a
	// restart here), not found here at it.
	came  bool
	lease fence.Lease
	// userStopped: stopped before the fence stopped it (roam kill
	// -STOP): a thaw leaves it so.
	userStopped bool
	// thawDue: its thaw came while CRIU dumped it and was put off: the
	// steps after the dump carry it out (rethaw).
	thawDue bool
}

// New is the fencing of a node, its homes' reach read from the file at
// path ("" keeps none).
func New(c fence.Config, procs job.Processes, log *slog.Logger, path string) *Leases {
	l := &Leases{c: c, procs: procs, log: log, path: path, reach: map[string]time.Time{}, jobs: map[string]*entry{}, killed: map[string]bool{},
		kick: make(chan struct{}, 1), startTix: procs.StartTicks(os.Getpid())}
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var m map[string]time.Time
			if json.Unmarshal(b, &m) == nil && m != nil && len(m) <= 1<<16 {
				l.reach = m
			}
		}
		// The jobs its fence killed, so that a restarted agent still says
		// so to their homes, which restart them (else their end was a
		// plain 137, and the job lost its restart).
		if b, err := os.ReadFile(path + killedFile); err == nil {
			var ids []string
			if json.Unmarshal(b, &ids) == nil && len(ids) <= 1<<16 {
				for _, id := range ids {
					l.killed[id] = true
				}
			}
		}
	}
	return l
}

// killedFile, after the reach file's path, names the file of the jobs
// the fence killed here whose homes have not had their end.
const killedFile = ".killed"

// killedList is l.killed as its file keeps it (l.mu held); nil when no
// file is kept.
func (l *Leases) killedList() []byte {
	if l.path == "" {
		return nil
	}
	ids := make([]string, 0, len(l.killed))
	for id := range l.killed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b, _ := json.Marshal(ids)
	return b
}

// Reached renews the leases of home's jobs here: a push to it sent at
// sent was acknowledged.
func (l *Leases) Reached(home string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.After(l.reach[home]) {
		l.reach[home], l.dirty = sent, true
	}
}

// Running tells the leases of the jobs running here and not moving, at
// now: a job's lease is its home's reach, or, while this node has never
// reached that home (as far as its file says), the time it first saw the
// job; a job they know that is not among js is forgotten once gone
// (stillHere false), and kept while it moves.
func (l *Leases) Running(js []Job, stillHere func(id string) bool, now time.Time) {
	seen := make(map[string]bool, len(js))
	var gone []string
	l.mu.Lock()
	for _, j := range js {
		seen[j.ID] = true
		e := l.jobs[j.ID]
		if e == nil || e.job.Tix != j.Tix {
			// A new copy (one that left and came back: the push loop of a
			// node with no job left sleeps, and its entry stayed) starts
			// a lease of its own, never the one that copy left behind.
			e = &entry{since: now, came: j.Tix > l.startTix}
			l.jobs[j.ID] = e
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
		e.job, e.lease.Fenced = j, j.Fenced
	}
	for id := range l.jobs {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	l.mu.Unlock()
	// The job table's lock is not taken under this one (a leaf); the
	// push loop, the one caller, changes nothing between the two.
	gone = slices.DeleteFunc(gone, stillHere)
	l.mu.Lock()
	forgot := false
	for _, id := range gone {
		delete(l.jobs, id)
		forgot = forgot || l.killed[id]
		delete(l.killed, id)
	}
	var save []byte
	if forgot {
		save = l.killedList()
	}
	l.mu.Unlock()
	if save != nil {
		l.write(l.path+killedFile, save)
	}
}

// Known lists the jobs the leases know here: those running, and those
// moving away (kept until they are gone).
func (l *Leases) Known() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.jobs))
	for id := range l.jobs {
		ids = append(ids, id)
	}
	return ids
}

// Killed says whether job id's fence killed it here: its home restarts
// it from its checkpoint rather than take its end (relay.Update.Fenced).
func (l *Leases) Killed(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.killed[id]
}

// Holding says whether job id's fence holds it stopped (past its lease,
// not by its user): it must not move, nor be saved, until its home is
// reached and the fence thaws it. A copy moved or restored from it would
// come stopped where no fence stopped it, and nothing would thaw it.
func (l *Leases) Holding(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[id]
	return e != nil && e.lease.State == fence.Stopped && !e.userStopped
}

// Loop steps the leases every StepEvery until stop closes; with no job
// here it sleeps until Running is told of one, so that an idle agent
// does not wake for nothing.
func (l *Leases) Loop(stop <-chan struct{}) {
	t := time.NewTicker(StepEvery)
	defer t.Stop()
	for {
		l.mu.Lock()
		tick := t.C
		if len(l.jobs) == 0 {
			tick = nil
		}
		l.mu.Unlock()
		select {
		case <-stop:
			return
		case <-tick:
		case <-l.kick:
		}
		l.Step(time.Now())
	}
}

// renewed is when job j's lease was last renewed, first seen here at
// since (l.mu held): its home's reach, or since while this node has never
// reached that home, and never newer than its Cap. A job that came here
// (came: a migration in, a restart here) holds its lease from when it
// came until the home's reach is newer: the reach of a home this node had
// no job of for a while is older than the job here, and would stop or
// kill it as it came. One found at the agent's start takes the file's
// reach, never its start.
func (l *Leases) renewed(j Job, since time.Time, came bool) time.Time {
	at := since
	if r, ok := l.reach[j.Home]; ok && (!came || r.After(since)) {
		at = r
	}
	if !j.Cap.IsZero() && j.Cap.Before(at) {
		at = j.Cap
	}
	return at
}

// Age is how old job j's lease is at now, for the header of its
// migration (migrate.Header.LeaseAge): zero for a job without one.
func (l *Leases) Age(j Job, now time.Time) time.Duration {
	if !j.Fenced {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	since, came := now, false
	if e := l.jobs[j.ID]; e != nil {
		since, came = e.since, e.came
	}
	return max(0, now.Sub(l.renewed(j, since, came)))
}

// action is one job's fence to carry out, without the lock.
type action struct {
	e  *entry
	do fence.Do
}

// restop stops a job the fence stopped before, if it runs again; rethaw
// carries out a thaw put off while CRIU dumped the job.
const (
	restop = fence.Kill + 1 + iota
	rethaw
)

// Step steps every lease at now and carries out what fence decides:
// stops and thaws through the job's roam-init, kills of its whole tree.
// It writes the homes' reach when it changed, at most every heartbeat.
func (l *Leases) Step(now time.Time) {
	var acts []action
	killed := false
	l.mu.Lock()
	for id, e := range l.jobs {
		e.lease.Renewed = l.renewed(e.job, e.since, e.came)
		var do fence.Do
		e.lease, do = l.c.Step(e.lease, now)
		if do == fence.Kill {
			l.killed[id] = true
			killed = true
		}
		if do != fence.None {
			acts = append(acts, action{e, do})
		} else if e.lease.State == fence.Stopped && !e.userStopped {
			// Stopped, it may have been continued since (a checkpoint's
			// thaw of a tree it froze as the fence stopped it): again.
			acts = append(acts, action{e, restop})
		} else if e.lease.State == fence.Running && e.thawDue {
			acts = append(acts, action{e, rethaw})
		}
	}
	var save, saveKilled []byte
	if l.path != "" && l.dirty && now.Sub(l.saved) >= l.c.HeartbeatEvery() {
		save, _ = json.Marshal(l.reach)
		l.saved, l.dirty = now, false
	}
	if killed {
		saveKilled = l.killedList()
	}
	l.mu.Unlock()
	if saveKilled != nil {
		l.write(l.path+killedFile, saveKilled) // before the kills: a crash between keeps the reason
	}
	for _, a := range acts {
		l.carryOut(a)
	}
	if save != nil {
		l.write(l.path, save)
	}
}

// carryOut stops, thaws or kills one job. A stop of a job its user had
// stopped already is noted, and its thaw leaves it stopped.
func (l *Leases) carryOut(a action) {
	j := a.e.job
	if !l.procs.Alive(j.PID, j.Tix) {
		return
	}
	if a.do != fence.Kill && l.Dumping != nil && l.Dumping(j.ID) {
		// CRIU holds the job frozen: a SIGSTOP or SIGCONT now reaches
		// tasks it has seized, and the checkpoint it takes may not
		// restore (the chaos run: "Can't open file ... on restore" on
		// every node). The next step after the dump stops it (restop),
		// or thaws it (rethaw): a thaw dropped here left a job whose home
		// was reached again stopped for good (the chaos run).
		if a.do == fence.Thaw || a.do == rethaw {
			l.mu.Lock()
			a.e.thawDue = true
			l.mu.Unlock()
		}
		return
	}
	switch a.do {
	case fence.Stop:
		stopped := l.procs.Stopped(j.PID)
		l.mu.Lock()
		// Still stopped by a thaw put off is the fence's stop, not the
		// user's.
		a.e.userStopped = stopped && !a.e.thawDue
		a.e.thawDue = false
		l.mu.Unlock()
		l.log.Warn("job stopped: its node has not reached its home for fence.lease", "job", j.ID, "home", j.Home)
		if !stopped {
			l.procs.Signal(j.PID, syscall.SIGSTOP)
		}
	case fence.Thaw, rethaw:
		l.mu.Lock()
		user := a.e.userStopped
		a.e.thawDue = false
		l.mu.Unlock()
		l.log.Info("job thawed: its home is reached again", "job", j.ID, "home", j.Home)
		if !user {
			l.procs.Signal(j.PID, syscall.SIGCONT)
		}
	case restop:
		if !l.procs.Stopped(j.PID) {
			l.log.Warn("job stopped again: it was continued while its node could not reach its home", "job", j.ID, "home", j.Home)
			l.procs.Signal(j.PID, syscall.SIGSTOP)
		}
	case fence.Kill:
		l.log.Warn("job killed: its node has not reached its home for fence.kill; its home may restart it", "job", j.ID, "home", j.Home)
		l.procs.Kill(j.PID, j.Tix, 5*time.Second)
	}
}

// write replaces a file of the fencing's (the homes' reach, the jobs
// killed). Not synced: it outlives a crash of the agent in the page
// cache, and a crash of the host ends the jobs it fences.
func (l *Leases) write(path string, b []byte) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		l.log.Error("fencing: keeping its state", "file", path, "err", err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		l.log.Error("fencing: keeping its state", "file", path, "err", err)
	}
}
