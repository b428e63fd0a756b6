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
	jobs map[string]bool
}

// begin notes that a restart of job id is being tried.
func (l *lostTries) begin(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[string]bool{}
	}
	l.jobs[id] = false
}

// end notes that the tries of job id ended.
func (l *lostTries) end(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.jobs, id)
}

// fenced notes that job id's node killed it by its fence, if its restart
// is being tried.
func (l *lostTries) fenced(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.jobs[id]; ok {
		l.jobs[id] = true
	}
}

// takeFenced says whether job id's node told of its fenced kill since
// the last call.
func (l *lostTries) takeFenced(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.jobs[id]
	if f {
		l.jobs[id] = false
	}
	return f
}
