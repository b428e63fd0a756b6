package migrate

import (
	"container/heap"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"
)

// The harness: N nodes that run both machines, on a fake clock, over an
// in-memory network that drops, duplicates, delays and stalls messages and
// partitions nodes, with a fake checkpointer that records every copy of
// every job and whether it runs. Agents crash and restart (their machines
// and in-flight work are lost; what they persisted, and the jobs' copies,
// are not). Besides migrations it takes checkpoints and restarts jobs
// from them (harness_file_test.go). After every event it checks the
// invariant.

var (
	seedFlag  = flag.Int64("seed", 0, "seed of TestRandomMigrations (0: a new one)")
	migsFlag  = flag.Int("migrations", 10000, "migrations TestRandomMigrations runs")
	ckptsFlag = flag.Int("checkpoints", 1000, "checkpoints TestRandomMigrations takes")
	rstsFlag  = flag.Int("restarts", 1000, "restarts TestRandomMigrations tries")
	traceFlag = flag.String("trace-job", "", "print every step of this job's migrations (go test's own -trace writes an execution trace)")
	errStall  = errors.New("no answer (timed out)")
	errDown   = errors.New("node unreachable")
	errFailed = errors.New("injected failure")
)

// copyOf is one copy of a job's process tree on a node.
type copyOf struct {
	id      int
	job     string
	node    int
	running bool
	mid     string // the migration that restored it; "" for the original
	moves   int    // the job's moves so far, as its local record says
	inc     int    // its incarnation, as its local record says
}

type node struct {
	id  int
	up  bool
	inc int // incarnation: work of an earlier one is dropped
	// persisted
	srcRecs map[string]Record
	inRecs  map[string]InRecord
	local   map[string]int     // job -> its copy here (the job table)
	hdrs    map[string]hdrInfo // migration -> what its header says of the job
	homes   map[string]*homeRec
	files   map[string]*ckptFile // checkpoint -> its file on this node's disk
	// volatile
	srcs      map[string]*Source
	dsts      map[string]*Dest
	migrating map[string]string // job -> the migration that claimed it
	streamReq map[string]func(error)
}

// hdrInfo is what a migration's header says of its job.
type hdrInfo struct{ moves, inc int }

type homeRec struct {
	node int
	seq  int
	inc  int // its incarnation: notes of older ones are dropped
	seen map[string]bool
	// ended: a checkpoint stopped it, and it runs nowhere (node 0).
	ended bool
	// restarting is the restart the home consented to and has not
	// decided; prev where the record said the job was before it.
	restarting string
	prev       int
	decided    map[string]Outcome // restarts decided, by MID
}

type event struct {
	at  time.Time
	seq int
	f   func()
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type faults struct {
	drop, dup, stall, fail, crash float64
}

type world struct {
	t      *testing.T
	rng    *rand.Rand
	now    time.Time
	q      queue
	seq    int
	nodes  []*node
	copies map[int]*copyOf
	nextID int
	jobs   []string
	home   map[string]int
	cut    map[[2]int]time.Time // partitions: until when
	f      faults
	calm   bool // no new faults, no new migrations: let everything settle
	mids   int
	counts map[string]int
	// The file endpoints (harness_file_test.go): checkpoints taken and
	// restarts tried so far; the files delivered; the jobs a checkpoint
	// stopped (they have no copy until a restart's runs).
	ckpts, rsts int
	archive     []archived
	ended       map[string]bool
}

func newWorld(t *testing.T, seed int64, nodes, jobs int) *world {
	w := &world{t: t, rng: rand.New(rand.NewSource(seed)), now: t0, copies: map[int]*copyOf{},
		home: map[string]int{}, cut: map[[2]int]time.Time{}, counts: map[string]int{}, ended: map[string]bool{}}
	w.f = faults{drop: 0.04, dup: 0.03, stall: 0.02, fail: 0.04, crash: 0.004}
	for i := 1; i <= nodes; i++ {
		w.nodes = append(w.nodes, &node{id: i, up: true, srcRecs: map[string]Record{}, inRecs: map[string]InRecord{},
			local: map[string]int{}, hdrs: map[string]hdrInfo{}, homes: map[string]*homeRec{}, files: map[string]*ckptFile{},
			srcs: map[string]*Source{}, dsts: map[string]*Dest{},
			migrating: map[string]string{}, streamReq: map[string]func(error){}})
	}
	for j := 0; j < jobs; j++ {
		h := 1 + w.rng.Intn(nodes)
		id := fmt.Sprintf("%d.%d", h, j+1)
		w.jobs = append(w.jobs, id)
		w.home[id] = h
		c := w.newCopy(id, h, true, "")
		w.node(h).local[id] = c.id
		w.node(h).homes[id] = &homeRec{node: h, seen: map[string]bool{}, decided: map[string]Outcome{}}
	}
	return w
}

func (w *world) node(id int) *node { return w.nodes[id-1] }

func (w *world) newCopy(job string, n int, running bool, mid string) *copyOf {
	w.nextID++
	c := &copyOf{id: w.nextID, job: job, node: n, running: running, mid: mid}
	w.copies[c.id] = c
	return c
}

func (w *world) at(d time.Duration, f func()) {
	w.seq++
	heap.Push(&w.q, event{at: w.now.Add(d), seq: w.seq, f: f})
}

// onNode runs f after d if node n is still the same incarnation and up.
func (w *world) onNode(n *node, d time.Duration, f func()) {
	inc := n.inc
	w.at(d, func() {
		if n.up && n.inc == inc {
			f()
		}
	})
}

func (w *world) chance(p float64) bool { return !w.calm && w.rng.Float64() < p }

func (w *world) delay() time.Duration {
	if w.chance(w.f.stall) {
		return time.Duration(5+w.rng.Intn(60)) * time.Second // a stall
	}
	return time.Duration(1+w.rng.Intn(30)) * time.Millisecond
}

func (w *world) linked(a, b int) bool {
	if a == b {
		return true
	}
	if a > b {
		a, b = b, a
	}
	return !w.now.Before(w.cut[[2]int{a, b}])
}

// call sends a request from node from to node to; handle runs there and
// answers through its reply function (at most once counts). The sender
// gets the first answer, or errStall after timeout.
func (w *world) call(from *node, to int, timeout time.Duration, handle func(dst *node, reply func(error)), answer func(error)) {
	done := false
	inc := from.inc // an answer to an earlier incarnation goes nowhere
	finish := func(err error) {
		if !done && from.inc == inc {
			done = true
			answer(err)
		}
	}
	w.onNode(from, timeout, func() { finish(errStall) })
	deliver := func() {
		w.at(w.delay(), func() {
			dst := w.node(to)
			if !dst.up || !w.linked(from.id, to) {
				return
			}
			handle(dst, func(err error) {
				if from.id != to && w.chance(w.f.drop) {
					return
				}
				w.at(w.delay(), func() {
					if w.linked(from.id, to) && from.up {
						w.onNode(from, 0, func() { finish(err) })
					}
				})
			})
		})
	}
	if from.id != to && w.chance(w.f.drop) {
		return
	}
	deliver()
	if from.id != to && w.chance(w.f.dup) {
		deliver()
	}
}

// ---- the source's driver ----

// pickLocal picks a job that runs on an up node and is not claimed.
func (w *world) pickLocal() (*node, string, bool) {
	var cands []struct {
		n   *node
		job string
	}
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		for job := range n.local {
			if n.migrating[job] == "" {
				cands = append(cands, struct {
					n   *node
					job string
				}{n, job})
			}
		}
	}
	if len(cands) == 0 {
		return nil, "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		return cands[i].n.id < cands[j].n.id || (cands[i].n.id == cands[j].n.id && cands[i].job < cands[j].job)
	})
	c := cands[w.rng.Intn(len(cands))]
	return c.n, c.job, true
}

func (w *world) startMigration() {
	n, job, ok := w.pickLocal()
	if !ok {
		return
	}
	c := struct {
		n   *node
		job string
	}{n, job}
	to := 1 + w.rng.Intn(len(w.nodes)-1)
	if to >= c.n.id {
		to++
	}
	w.mids++
	mid := fmt.Sprintf("%016x", w.mids)
	c.n.migrating[c.job] = mid
	s := &Source{}
	c.n.srcs[mid] = s
	w.counts["started"]++
	cp := w.copies[c.n.local[c.job]]
	seq := cp.moves + 1 // as the job's local record says
	w.stepSrc(c.n, s, Start{MID: mid, Job: c.job, Home: fmt.Sprint(w.home[c.job]), To: fmt.Sprint(to),
		Lazy: w.rng.Intn(4) == 0, Seq: seq, Inc: cp.inc, PID: cp.id})
}

func (w *world) stepSrc(n *node, s *Source, ev SourceEvent) {
	before := s.State()
	acts := s.Step(w.now, ev)
	if *traceFlag != "" && s.Record().Job == *traceFlag {
		w.t.Logf("%9s n%d src %s %-10s %-22s -> %-10s %s", w.now.Sub(t0), n.id, s.Record().MID[12:], before, eventName(ev), s.State(), names(acts))
	}
	w.check()
	w.doSrc(n, s, acts)
}

func (w *world) doSrc(n *node, s *Source, acts []SourceAction) {
	r := s.Record()
	if r.Target == TargetFile {
		w.doCkpt(n, s, acts)
		return
	}
	to := atoi(r.To)
	for _, a := range acts {
		switch a := a.(type) {
		case CheckLocal:
			pin := ""
			if w.chance(0.02) {
				pin = "holds open the device /dev/fb0"
			}
			w.onNode(n, time.Millisecond, func() { w.stepSrc(n, s, LocalChecked{Pin: pin}) })
		case SendCheck:
			w.call(n, to, 5*time.Second, func(d *node, reply func(error)) { w.handleCheck(d, r, n.id, reply) },
				func(err error) { w.stepSrc(n, s, CheckAnswer{err}) })
		case Persist:
			n.srcRecs[a.Record.MID] = a.Record
		case Dump:
			if c := w.copies[r.PID]; c != nil {
				c.running = false
			}
			var err error
			if w.chance(w.f.fail) {
				err = errFailed
			}
			w.onNode(n, time.Duration(50+w.rng.Intn(200))*time.Millisecond, func() { w.stepSrc(n, s, Dumped{err}) })
		case SendImages:
			streamed := !r.Lazy
			moves := r.Seq - 1 // the header carries the job's moves
			w.call(n, to, 60*time.Second, func(d *node, reply func(error)) {
				d.hdrs[r.MID] = hdrInfo{moves: moves, inc: r.Inc}
				w.handleStream(d, Stream{MID: r.MID, Job: r.Job, From: fmt.Sprint(n.id), Lazy: r.Lazy, Streamed: streamed}, reply)
			}, func(err error) { w.stepSrc(n, s, ReadyAnswer{err}) })
		case Thaw:
			if c := w.copies[r.PID]; c != nil {
				c.running = true
			}
		case Kill:
			w.kill(n, r)
			if n.migrating[r.Job] == r.MID {
				delete(n.migrating, r.Job)
			}
			w.onNode(n, time.Duration(1+w.rng.Intn(20))*time.Millisecond, func() { w.stepSrc(n, s, CopyGone{}) })
		case SendCommit:
			w.call(n, to, 5*time.Second, func(d *node, reply func(error)) { w.stepDst(d, r.MID, CommitMsg{}, reply) },
				func(err error) { w.stepSrc(n, s, CommitAnswer{err}) })
		case SendAbort:
			w.call(n, to, 5*time.Second, func(d *node, reply func(error)) { w.stepDst(d, r.MID, AbortMsg{}, reply) },
				func(error) {})
		case WaitPages:
			w.onNode(n, time.Duration(10+w.rng.Intn(500))*time.Millisecond, func() { w.stepSrc(n, s, PagesDone{}) })
		case NoteHome:
			ok := a.OK
			w.call(n, w.home[r.Job], 5*time.Second, func(h *node, reply func(error)) {
				hr := h.homes[r.Job]
				if !hr.seen[r.MID] && r.Inc >= hr.inc {
					hr.seen[r.MID] = true
					node, seq := ApplyNote(fmt.Sprint(hr.node), hr.seq, ok, r.To, r.Seq)
					hr.node, hr.seq = atoi(node), seq
				}
				reply(nil)
			}, func(err error) { w.stepSrc(n, s, HomeAnswer{err}) })
		case Finish:
			if n.migrating[r.Job] == r.MID {
				delete(n.migrating, r.Job)
			}
			if a.Err == nil {
				w.counts["committed"]++
			} else {
				w.counts["aborted"]++
			}
		case Wake:
			w.onNode(n, a.At.Sub(w.now), func() { w.stepSrc(n, s, Tick{}) })
		default:
			w.t.Fatalf("source: unknown action %T", a)
		}
	}
}

// ---- the destination's driver ----

func (w *world) handleCheck(d *node, r Record, from int, reply func(error)) {
	if _, here := d.local[r.Job]; here {
		reply(errors.New("job already here"))
		return
	}
	for _, m := range d.dsts {
		if rec := m.Record(); rec.Job == r.Job && !m.Final() && rec.MID != r.MID {
			reply(errors.New("job already arriving here"))
			return
		}
	}
	if !r.Lazy {
		w.stepDst(d, r.MID, Offer{MID: r.MID, Job: r.Job, From: fmt.Sprint(from)}, func(error) {})
	}
	reply(nil)
}

func (w *world) handleStream(d *node, e Stream, reply func(error)) {
	if _, here := d.local[e.Job]; here {
		reply(errors.New("job already here"))
		return
	}
	m := d.dsts[e.MID]
	if m == nil {
		if e.Streamed {
			reply(errors.New("no page sink for this migration"))
			return
		}
		m = &Dest{}
		d.dsts[e.MID] = m
	}
	if m.State() == DstNew || m.State() == DstSinkOpen {
		d.streamReq[e.MID] = reply
		w.stepDstM(d, m, e, nil)
		return
	}
	w.stepDstM(d, m, e, reply)
}

func (w *world) stepDst(d *node, mid string, ev DestEvent, reply func(error)) {
	m := d.dsts[mid]
	if m == nil {
		if r, ok := d.inRecs[mid]; ok {
			// Ended and recovered or kept: answer from the record.
			m, _ = RecoverDest(w.now, r)
			m.rec = r
			d.dsts[mid] = m
		} else {
			m = &Dest{}
			d.dsts[mid] = m
		}
	}
	w.stepDstM(d, m, ev, reply)
}

func (w *world) stepDstM(d *node, m *Dest, ev DestEvent, reply func(error)) {
	before := m.State()
	acts := m.Step(w.now, ev)
	if *traceFlag != "" && m.Record().Job == *traceFlag {
		w.t.Logf("%9s n%d dst %s %-10s %-22s -> %-10s %s", w.now.Sub(t0), d.id, m.Record().MID[12:], before, eventName(ev), m.State(), names(acts))
	}
	w.check()
	w.doDst(d, m, acts, reply)
}

func (w *world) doDst(d *node, m *Dest, acts []DestAction, reply func(error)) {
	r := m.Record()
	for _, a := range acts {
		if r.Restart && w.doRestart(d, m, r, a) {
			continue
		}
		switch a := a.(type) {
		case PersistIn:
			d.inRecs[a.Record.MID] = a.Record
			r = a.Record
		case Receive:
			var err error
			if w.chance(w.f.fail) {
				err = errFailed
			}
			w.onNode(d, time.Duration(10+w.rng.Intn(100))*time.Millisecond, func() { w.stepDstM(d, m, Received{err}, nil) })
		case Restore:
			job, mid := r.Job, r.MID
			h, here := d.hdrs[mid], error(nil)
			if r.Restart {
				h, here = w.restoring(d, r)
			}
			fail := w.chance(w.f.fail)
			inc := d.inc
			w.at(time.Duration(20+w.rng.Intn(200))*time.Millisecond, func() {
				if d.inc != inc || !d.up {
					// The agent died while CRIU restored: sometimes
					// the stopped tree survives it.
					if w.rng.Intn(2) == 0 && !fail {
						w.newCopy(job, d.id, false, mid)
					}
					return
				}
				if fail || here != nil {
					w.stepDstM(d, m, Restored{Err: errors.Join(errFailed, here)}, nil)
					return
				}
				c := w.newCopy(job, d.id, false, mid)
				c.moves, c.inc = h.moves+1, h.inc
				w.stepDstM(d, m, Restored{PID: c.id}, nil)
			})
		case Reply:
			to := reply
			if to == nil {
				to = d.streamReq[r.MID]
				delete(d.streamReq, r.MID)
			}
			if to != nil {
				to(a.Err)
			}
		case Adopt:
			if c := w.copies[r.PID]; c != nil && c.node == d.id {
				if id, ok := d.local[r.Job]; ok && id != c.id {
					w.t.Fatalf("%s: node %d adopts a copy of job %s, which its job table holds already: %s", w.now.Sub(t0), d.id, r.Job, w.describe(r.Job))
				}
				d.local[r.Job] = c.id
			}
		case Resume:
			if w.chance(w.f.crash * 5) {
				// The agent dies adopted but not resumed: its next run
				// must still let the copy run.
				w.counts["crash-before-resume"]++
				w.crash(d)
				return
			}
			if c := w.copies[r.PID]; c != nil && c.node == d.id && !c.running {
				if r.Restart {
					w.noneRuns(r.Job, "resumes")
					w.ended[r.Job] = false
				}
				c.running = true
			}
			w.onNode(d, time.Millisecond, func() { w.stepDstM(d, m, Resumed{}, nil) })
		case Discard:
			for id, c := range w.copies {
				if c.node == d.id && c.mid == r.MID && d.local[c.job] != id {
					delete(w.copies, id)
				}
			}
		case Ask:
			mid, from := r.MID, atoi(r.From)
			w.call(d, from, 5*time.Second, func(s *node, reply func(error)) {
				rec, ok := s.srcRecs[mid]
				o := Answer(rec, ok)
				// The answer travels as the reply, through the
				// network's error channel.
				reply(outcomeErr{o})
			}, func(err error) {
				var oe outcomeErr
				if errors.As(err, &oe) {
					w.stepDstM(d, m, Answered{Outcome: oe.o}, nil)
					return
				}
				w.stepDstM(d, m, Answered{Err: err}, nil)
			})
		case Wake:
			w.onNode(d, a.At.Sub(w.now), func() { w.stepDstM(d, m, Tick{}, nil) })
		default:
			w.t.Fatalf("destination: unknown action %T", a)
		}
	}
}

// outcomeErr carries an outcome through the network's error channel.
type outcomeErr struct{ o Outcome }

func (e outcomeErr) Error() string { return string(e.o) }

// ---- crashes ----

func (w *world) crash(n *node) {
	if *traceFlag != "" {
		w.t.Logf("%9s n%d CRASH", w.now.Sub(t0), n.id)
	}
	n.up = false
	n.inc++
	n.srcs, n.dsts = map[string]*Source{}, map[string]*Dest{}
	n.migrating, n.streamReq = map[string]string{}, map[string]func(error){}
	w.counts["crashes"]++
	w.at(time.Duration(100+w.rng.Intn(20000))*time.Millisecond, func() { w.restart(n) })
}

// kill kills a source's copy, by its PID as the agent does.
func (w *world) kill(n *node, r Record) {
	delete(w.copies, r.PID)
	if n.local[r.Job] == r.PID {
		delete(n.local, r.Job)
	}
}

func (w *world) restart(n *node) {
	n.up = true
	w.counts["restarts"]++
	for _, mid := range slices.Sorted(maps.Keys(n.srcRecs)) {
		r := n.srcRecs[mid]
		if Expired(r, w.now) {
			delete(n.srcRecs, mid)
			continue
		}
		s, acts := Recover(w.now, r)
		n.srcs[mid] = s
		if r.Outcome == Pending {
			w.counts["recovered-pending"]++
		}
		if st := s.State(); st == SrcCommitting || st == SrcPostCopy {
			// Its copy here is being killed: no new migration of it.
			n.migrating[r.Job] = mid
		}
		w.doSrc(n, s, acts)
	}
	for _, mid := range slices.Sorted(maps.Keys(n.inRecs)) {
		r := n.inRecs[mid]
		if DestExpired(r, w.now) {
			delete(n.inRecs, mid)
			continue
		}
		d, acts := RecoverDest(w.now, r)
		n.dsts[mid] = d
		w.doDst(n, d, acts, nil)
	}
	w.check()
}

// ---- the invariant ----

func (w *world) check() {
	w.t.Helper()
	running, all := map[string]int{}, map[string]int{}
	for _, c := range w.copies {
		all[c.job]++
		if c.running {
			running[c.job]++
		}
	}
	for _, j := range w.jobs {
		if running[j] > 1 {
			w.t.Fatalf("%s: job %s runs %d copies: %s", w.now.Sub(t0), j, running[j], w.describe(j))
		}
		if all[j] == 0 && !w.ended[j] {
			w.t.Fatalf("%s: job %s has no copy left", w.now.Sub(t0), j)
		}
	}
	w.checkFiles()
}

func (w *world) describe(job string) string {
	s := ""
	for _, c := range w.copies {
		if c.job == job {
			s += fmt.Sprintf("[node %d running=%v mid=%q inc=%d] ", c.node, c.running, c.mid, c.inc)
		}
	}
	return s
}

func (w *world) run(until time.Time) {
	for w.q.Len() > 0 {
		e := heap.Pop(&w.q).(event)
		if e.at.After(until) {
			heap.Push(&w.q, e)
			return
		}
		w.now = e.at
		e.f()
	}
}

// chaos schedules the next random fault or migration.
func (w *world) chaos() {
	if w.calm {
		return
	}
	switch x := w.rng.Float64(); {
	case x < w.f.crash:
		n := w.nodes[w.rng.Intn(len(w.nodes))]
		if n.up {
			w.crash(n)
		}
	case x < w.f.crash+0.002:
		a, b := 1+w.rng.Intn(len(w.nodes)), 1+w.rng.Intn(len(w.nodes))
		if a != b {
			if a > b {
				a, b = b, a
			}
			w.cut[[2]int{a, b}] = w.now.Add(time.Duration(1+w.rng.Intn(30)) * time.Second)
			w.counts["partitions"]++
		}
	default:
		// Restarts go on, more slowly, once there were enough: they are
		// the only way back for a job a checkpoint stopped.
		switch y := w.rng.Float64(); {
		case y < 0.09 && w.ckpts < *ckptsFlag:
			w.startCheckpoint()
		case y < 0.18 && w.rsts < *rstsFlag || y < 0.11 && w.anyEnded():
			w.startRestart()
		case w.mids < *migsFlag:
			w.startMigration()
		case w.ckpts < *ckptsFlag:
			w.startCheckpoint()
		case w.rsts < *rstsFlag:
			w.startRestart()
		}
	}
	w.at(time.Duration(20+w.rng.Intn(200))*time.Millisecond, w.chaos)
}

// TestRandomMigrations runs many migrations of a few jobs among four nodes
// with faults at random points and checks the invariant after every step;
// then it lets the cluster settle and checks that every job runs exactly
// once, that no stopped copy is left, and that each home record says
// where its job runs.
func TestRandomMigrations(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (go test ./internal/migrate -run TestRandomMigrations -seed %d replays it)", seed, seed)
	w := newWorld(t, seed, 4, 6)
	w.chaos()
	for w.busy() && w.q.Len() > 0 {
		w.run(w.now.Add(time.Minute))
	}
	// Settle: no new faults or migrations; every node up, every link
	// healed; then run until the clocks of every machine have run out.
	w.calm = true
	w.cut = map[[2]int]time.Time{}
	for _, n := range w.nodes {
		if !n.up {
			w.restart(n)
		}
	}
	w.run(w.now.Add(time.Hour))
	for _, j := range w.jobs {
		w.checkSettled(j)
	}
	w.checkSettledFiles()
	t.Logf("%d migrations: %d committed, %d aborted; %d crashes (%d between a copy's adoption and its resume), %d partitions, %d undecided found at restart",
		w.mids, w.counts["committed"], w.counts["aborted"], w.counts["crashes"], w.counts["crash-before-resume"], w.counts["partitions"], w.counts["recovered-pending"])
	t.Logf("%d checkpoints: %d delivered (%d stopping their job), %d failed; %d restarts: %d consented to, %d resumed, %d failed (%d refused by the home)",
		w.ckpts, w.counts["ckpt-committed"], w.counts["ckpt-stopped"], w.counts["ckpt-aborted"],
		w.rsts, w.counts["restart-consented"], w.counts["restart-committed"], w.counts["restart-aborted"], w.counts["restart-refused"])
	if w.counts["committed"] < w.mids/4 || w.counts["aborted"] == 0 || w.counts["crashes"] == 0 || w.counts["crash-before-resume"] == 0 {
		t.Errorf("the faults drowned the migrations or never happened: %v", w.counts)
	}
	if w.mids < *migsFlag || w.ckpts < *ckptsFlag || w.rsts < *rstsFlag {
		t.Errorf("%d migrations, %d checkpoints, %d restarts: want at least %d, %d, %d", w.mids, w.ckpts, w.rsts, *migsFlag, *ckptsFlag, *rstsFlag)
	}
	if w.counts["ckpt-committed"] < w.ckpts/4 || w.counts["ckpt-aborted"] == 0 ||
		w.counts["restart-committed"] < w.rsts/10 || w.counts["restart-aborted"] == 0 || w.counts["restart-refused"] == 0 {
		t.Errorf("the faults drowned the checkpoints or restarts, or never happened: %v", w.counts)
	}
}

// busy says the run has not started every migration, checkpoint and
// restart it is to make.
func (w *world) busy() bool {
	return w.mids < *migsFlag || w.ckpts < *ckptsFlag || w.rsts < *rstsFlag
}

// checkSettled checks job j once the cluster settled: it runs exactly
// once, where its home record says, in one node's job table; or a
// checkpoint stopped it and no copy of it is left.
func (w *world) checkSettled(j string) {
	t := w.t
	hr := w.node(w.home[j]).homes[j]
	if hr.restarting != "" {
		t.Errorf("job %s: its home still marks it restarting (%s)", j, hr.restarting)
	}
	var runningOn []int
	for _, c := range w.copies {
		if c.job != j {
			continue
		}
		if !c.running {
			t.Errorf("job %s: a stopped copy is left on node %d (migration %s)", j, c.node, c.mid)
			continue
		}
		runningOn = append(runningOn, c.node)
		if c.inc != hr.inc {
			t.Errorf("job %s runs as incarnation %d, its home record says %d", j, c.inc, hr.inc)
		}
	}
	if w.ended[j] {
		if len(runningOn) != 0 || !hr.ended {
			t.Fatalf("job %s, stopped by a checkpoint, runs on %v; its home says ended %v", j, runningOn, hr.ended)
		}
		return
	}
	if len(runningOn) != 1 {
		t.Fatalf("job %s runs on %v after settling", j, runningOn)
	}
	if hr.node != runningOn[0] || hr.ended {
		t.Errorf("job %s runs on node %d, its home record says %d (ended %v)", j, runningOn[0], hr.node, hr.ended)
	}
	holders := 0
	for _, n := range w.nodes {
		if id, ok := n.local[j]; ok {
			holders++
			if c := w.copies[id]; c == nil || c.node != n.id {
				t.Errorf("job %s: node %d's job table names a copy that is not there", j, n.id)
			}
		}
	}
	if holders != 1 {
		t.Errorf("job %s is in %d nodes' job tables", j, holders)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic("harness: node id " + s)
	}
	return n
}
