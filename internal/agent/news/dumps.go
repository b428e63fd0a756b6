package news

// A job whose dump dies under it: CRIU killed (the chaos run's fault, an
// OOM kill, a crash) while its parasite code is in the job's tasks leaves
// them to run on into it once they are let go, and they die of it
// (SIGTRAP, SIGSEGV). That death is roam's doing, not the job's: a job
// whose exit by a signal comes while a dump of it is under way, or within
// dumpDeathWindow of one that failed, is told to its home as killed by
// its node (relay.Update.Fenced), so that a home that keeps a checkpoint
// of it restarts it from there, and ends it with api.EndDumpFailed, not
// with a bare 133, when none is kept.

import (
	"sync"
	"time"
)

// dumpDeathWindow bounds how long after a failed dump a job's death by a
// signal is taken for the dump's: the tasks die as they are let go, at
// once (the thaw after the abort, or CRIU's death itself).
const dumpDeathWindow = 10 * time.Second

// dumps are the jobs here with a dump under way or failed lately. A leaf
// lock.
type dumps struct {
	mu sync.Mutex
	at map[string]dumpMark
}

type dumpMark struct {
	running int       // dumps under way
	failed  time.Time // when the last one failed
}

// DumpBegins notes that a dump of job id (a migration's, a checkpoint's)
// begins.
func (r *Relay) DumpBegins(id string) {
	r.dumps.mu.Lock()
	defer r.dumps.mu.Unlock()
	if r.dumps.at == nil {
		r.dumps.at = map[string]dumpMark{}
	}
	m := r.dumps.at[id]
	m.running++
	r.dumps.at[id] = m
}

// DumpEnds notes that a dump of job id ended, failed when err is set.
func (r *Relay) DumpEnds(id string, err error) {
	r.dumps.mu.Lock()
	defer r.dumps.mu.Unlock()
	m := r.dumps.at[id]
	m.running = max(m.running-1, 0)
	if err != nil {
		m.failed = time.Now()
	}
	if m.running == 0 && m.failed.IsZero() {
		delete(r.dumps.at, id)
		return
	}
	r.dumps.at[id] = m
}

// killedByDump says whether job id, ended by a signal at now, died of a
// dump: one under way, or one failed within dumpDeathWindow. Marks older
// than that are dropped.
func (r *Relay) killedByDump(id string, now time.Time) bool {
	r.dumps.mu.Lock()
	defer r.dumps.mu.Unlock()
	for k, m := range r.dumps.at {
		if m.running == 0 && now.Sub(m.failed) > dumpDeathWindow {
			delete(r.dumps.at, k)
		}
	}
	m, ok := r.dumps.at[id]
	return ok && (m.running > 0 || now.Sub(m.failed) <= dumpDeathWindow)
}

// dumping says whether a dump of job id is under way here.
func (r *Relay) dumping(id string) bool {
	r.dumps.mu.Lock()
	defer r.dumps.mu.Unlock()
	return r.dumps.at[id].running > 0
}
