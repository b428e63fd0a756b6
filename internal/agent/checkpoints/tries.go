package checkpoints

import "sync"

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
