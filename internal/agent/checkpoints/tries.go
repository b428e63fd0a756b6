package checkpoints

import (
	"encoding/json"
	"os"
	"sync"

	"roam/internal/job"
)

// lostTries are the jobs whose restart after node loss RestartLost is
// trying (it holds each, and waits between tries), each with whether
// the node it was lost with told meanwhile that its fence killed it: the
// fenced news's own restart finds the job held and leaves it to the one
// trying, which may then take the node's answer again for the kill it
// is, not for a copy that runs on. A leaf lock: nothing is called under
// it.
type lostTries struct {
	mu   sync.Mutex
	jobs map[string]*lostTry
}

// lostTry is a job's entry: the restarts trying it (one holds it; one
// ending may overlap the next's start), and the fenced kill told.
type lostTry struct {
	n      int
	killed bool
}

// begin notes that a restart of job id is being tried.
func (l *lostTries) begin(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[string]*lostTry{}
	}
	if l.jobs[id] == nil {
		l.jobs[id] = &lostTry{}
	}
	l.jobs[id].n++
}

// end notes that one restart of job id ended its tries.
func (l *lostTries) end(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.jobs[id]; e != nil {
		if e.n--; e.n <= 0 {
			delete(l.jobs, id)
		}
	}
}

// fenced notes that job id's node killed it by its fence, if its restart
// is being tried.
func (l *lostTries) fenced(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.jobs[id]; e != nil {
		e.killed = true
	}
}

// takeFenced says whether job id's node told of its fenced kill since
// the last call.
func (l *lostTries) takeFenced(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[id]
	if e == nil || !e.killed {
		return false
	}
	e.killed = false
	return true
}

// fencedFile, in the keeper's directory, keeps the jobs whose restart
// after a fenced kill is being tried, across a restart of this agent:
// their nodes forgot them once told of the kill, their records still say
// they run there, and nothing else would bring them back (a home
// restarted while such a restart waited for its next try forgot it). A
// restart after a node's death needs no such file: the lost-job sweep
// finds the job again on the dead node.
const fencedFile = "fenced-restarts.json"

// fencedTry is a job's entry in fencedFile: its incarnation and the node
// whose fence killed it.
type fencedTry struct {
	Inc  int    `json:"inc"`
	Lost string `json:"lost"`
}

// keep notes in path that job rec's node lost killed it by its fence
// and its restart is being tried; forget (keep false) that it is not.
// Written under the lock: one write at a time, in order.
func (l *lostTries) keep(path string, rec job.Record, lost string, keep bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := readFenced(path)
	if _, had := m[rec.ID]; had == keep {
		return nil
	}
	if keep {
		m[rec.ID] = fencedTry{Inc: rec.Inc, Lost: lost}
	} else {
		delete(m, rec.ID)
	}
	b, _ := json.Marshal(m)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readFenced is fencedFile's entries (none when it cannot be read).
func readFenced(path string) map[string]fencedTry {
	m := map[string]fencedTry{}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &m) != nil || len(m) > 1<<16 {
		m = map[string]fencedTry{}
	}
	return m
}
