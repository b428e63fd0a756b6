package migrate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The harness's file endpoints: checkpoints (a Source with Target
// TargetFile) write a file on their node's fake disk, rename it and
// deliver it to an archive, which restarts (a Dest started by Restart)
// take files from. The faults: a dump, write, rename, delivery, unpack or
// restore error, a delivery whose answer is lost, a changed file, the
// home refusing (the job runs) or unreachable, and crashes at any point.
// After every step: never two running copies; a restart restores or
// resumes only while no copy of its job runs; a file under its final name
// is whole; a decided checkpoint has left no file on its node.

// ckptFile is a checkpoint's file on its node's disk.
type ckptFile struct {
	job      string
	final    bool // renamed to its final name; else under the temporary one
	complete bool // every byte and the seal written
}

// archived is a delivered checkpoint file, with whoever keeps it.
type archived struct{ job string }

// errRefused: the home does not consent.
var errRefused = errors.New("the job runs, or is being restarted")

// ---- checkpoints ----

func (w *world) startCheckpoint() {
	n, job, ok := w.pickLocal()
	if !ok {
		return
	}
	w.ckpts++
	mid := fmt.Sprintf("%016x", 1<<60|w.ckpts)
	n.migrating[job] = mid
	s := &Source{}
	n.srcs[mid] = s
	cp := w.copies[n.local[job]]
	w.stepSrc(n, s, Start{MID: mid, Job: job, Home: fmt.Sprint(w.home[job]), Target: TargetFile,
		Stop: w.rng.Intn(3) == 0, Inc: cp.inc, PID: cp.id})
}

// later steps the source with the event ev makes after a while, if its
// node is still the same incarnation then.
func (w *world) later(n *node, s *Source, ev func() SourceEvent) {
	w.onNode(n, time.Duration(5+w.rng.Intn(100))*time.Millisecond, func() { w.stepSrc(n, s, ev()) })
}

func (w *world) failure() error {
	if w.chance(w.f.fail) {
		return errFailed
	}
	return nil
}

func (w *world) doCkpt(n *node, s *Source, acts []SourceAction) {
	r := s.Record()
	for _, a := range acts {
		switch a := a.(type) {
		case CheckLocal:
			pin := ""
			if w.chance(0.02) {
				pin = "holds open the device /dev/fb0"
			}
			w.later(n, s, func() SourceEvent { return LocalChecked{Pin: pin} })
		case Persist:
			n.srcRecs[a.Record.MID] = a.Record
		case Dump:
			if c := w.copies[r.PID]; c != nil {
				c.running = false
			}
			err := w.failure()
			w.later(n, s, func() SourceEvent { return Dumped{err} })
		case Thaw:
			if c := w.copies[r.PID]; c != nil {
				c.running = true
			}
		case WriteFile:
			f := &ckptFile{job: r.Job}
			n.files[r.MID] = f
			err := w.failure()
			w.later(n, s, func() SourceEvent {
				if err == nil && n.files[r.MID] == f {
					f.complete = true
				}
				return Written{err}
			})
		case SealFile:
			w.seal(n, s, r)
		case Deliver:
			w.deliver(n, s, r)
		case RemoveFile:
			delete(n.files, r.MID)
		case Kill:
			w.kill(n, r)
			w.ended[r.Job] = true
			w.later(n, s, func() SourceEvent { return CopyGone{} })
		case NoteHome:
			ok := a.OK
			w.call(n, w.home[r.Job], 5*time.Second, func(h *node, reply func(error)) {
				hr := h.homes[r.Job]
				if *traceFlag == r.Job {
					w.t.Logf("%9s home of %s: note of checkpoint %s inc %d (home: inc %d, seen %v, node %d) %s", w.now.Sub(t0), r.Job, r.MID[12:], r.Inc, hr.inc, hr.seen[r.MID], hr.node, w.describe(r.Job))
				}
				if !hr.seen[r.MID] && r.Inc == hr.inc && ok && r.Stop {
					hr.ended, hr.node = true, 0
				}
				hr.seen[r.MID] = true
				reply(nil)
			}, func(err error) { w.stepSrc(n, s, HomeAnswer{err}) })
		case Finish:
			if n.migrating[r.Job] == r.MID {
				delete(n.migrating, r.Job)
			}
			w.countCkpt(r, a.Err)
		case Wake:
			w.onNode(n, a.At.Sub(w.now), func() { w.stepSrc(n, s, Tick{}) })
		default:
			w.t.Fatalf("checkpoint: %T asked for", a)
		}
	}
}

func (w *world) countCkpt(r Record, err error) {
	switch {
	case err != nil:
		w.counts["ckpt-aborted"]++
	case r.Stop:
		w.counts["ckpt-stopped"]++
		fallthrough
	default:
		w.counts["ckpt-committed"]++
	}
}

// seal renames the file at once (a crash before the answer leaves it
// renamed), or fails and leaves it where it is.
func (w *world) seal(n *node, s *Source, r Record) {
	f := n.files[r.MID]
	if f == nil {
		w.t.Fatalf("checkpoint %s: SealFile without a file", r.MID)
	}
	err := w.failure()
	if err == nil {
		f.final = true
	}
	w.later(n, s, func() SourceEvent { return Sealed{err} })
}

// deliver hands the file over, or fails, or hands it over and loses the
// answer.
func (w *world) deliver(n *node, s *Source, r Record) {
	f := n.files[r.MID]
	if f == nil || !f.final || !f.complete {
		w.t.Fatalf("checkpoint %s: Deliver of a file not sealed: %+v", r.MID, f)
	}
	err := w.failure()
	lost := err == nil && w.chance(w.f.drop)
	w.later(n, s, func() SourceEvent {
		if err == nil && n.files[r.MID] == f {
			delete(n.files, r.MID)
			w.archive = append(w.archive, archived{job: r.Job})
		}
		if lost {
			return Delivered{errStall}
		}
		return Delivered{err}
	})
}

// ---- restarts ----

// anyEnded says a checkpoint has stopped a job.
func (w *world) anyEnded() bool {
	for _, e := range w.ended {
		if e {
			return true
		}
	}
	return false
}

// startRestart restarts a job from a delivered file on a random node:
// mostly one a checkpoint stopped, sometimes any (its home then refuses).
func (w *world) startRestart() {
	var stopped []int
	for i, f := range w.archive {
		if w.ended[f.job] {
			stopped = append(stopped, i)
		}
	}
	var i int
	switch {
	case len(stopped) > 0 && w.rng.Intn(5) > 0:
		i = stopped[w.rng.Intn(len(stopped))]
	case len(w.archive) > 0 && w.rng.Intn(3) == 0:
		i = w.rng.Intn(len(w.archive))
	default:
		return
	}
	d := w.nodes[w.rng.Intn(len(w.nodes))]
	if !d.up {
		return
	}
	w.rsts++
	mid := fmt.Sprintf("%016x", 2<<60|w.rsts)
	m := &Dest{}
	d.dsts[mid] = m
	d.streamReq[mid] = func(err error) {
		if err == nil {
			w.counts["restart-committed"]++
		} else {
			w.counts["restart-aborted"]++
		}
	}
	job := w.archive[i].job
	w.stepDstM(d, m, Restart{MID: mid, Job: job, Home: fmt.Sprint(w.home[job]), File: strconv.Itoa(i)}, nil)
}

// grant is the home's consent as the harness encodes it: "inc,moves".
func grant(inc, moves int) []byte { return fmt.Appendf(nil, "%d,%d", inc, moves) }

func grantOf(b []byte) hdrInfo {
	inc, moves, _ := strings.Cut(string(b), ",")
	return hdrInfo{inc: atoi(inc), moves: atoi(moves)}
}

// consentErr carries the home's consent, or refusal, through the
// network's error channel.
type consentErr struct {
	refused    bool
	inc, moves int
}

func (e consentErr) Error() string { return fmt.Sprintf("consent %+v", e.inc) }

// doRestart carries out the actions only a restart has; false for the
// others, which doDst carries out as for a migration.
func (w *world) doRestart(d *node, m *Dest, r InRecord, a DestAction) bool {
	home := atoi(r.Home)
	switch a.(type) {
	case Verify:
		err := w.failure()
		if w.chance(0.03) {
			err = errors.New("bad checkpoint: its seal does not match") // the copy read was changed
		}
		w.onNode(d, time.Duration(5+w.rng.Intn(50))*time.Millisecond, func() { w.stepDstM(d, m, Verified{err}, nil) })
	case AskConsent:
		w.call(d, home, 5*time.Second, func(h *node, reply func(error)) {
			ce := w.consent(h.homes[r.Job], r.MID, d.id)
			if *traceFlag == r.Job {
				w.t.Logf("%9s home of %s: consent %s on %d: refused %v inc %d", w.now.Sub(t0), r.Job, r.MID[12:], d.id, ce.refused, ce.inc)
			}
			reply(ce)
		},
			func(err error) {
				var ce consentErr
				switch {
				case errors.As(err, &ce) && ce.refused:
					w.stepDstM(d, m, ConsentAnswer{Refused: true, Err: errRefused}, nil)
				case errors.As(err, &ce):
					w.stepDstM(d, m, ConsentAnswer{Inc: ce.inc, Grant: grant(ce.inc, ce.moves)}, nil)
				default:
					w.stepDstM(d, m, ConsentAnswer{Err: err}, nil)
				}
			})
	case CommitAtHome:
		w.call(d, home, 5*time.Second, func(h *node, reply func(error)) { reply(outcomeErr{w.commitRestart(h.homes[r.Job], r.MID)}) },
			func(err error) {
				var oe outcomeErr
				if errors.As(err, &oe) {
					w.stepDstM(d, m, HomeDecided{Outcome: oe.o}, nil)
					return
				}
				w.stepDstM(d, m, HomeDecided{Err: err}, nil)
			})
	case TellHome:
		w.call(d, home, 5*time.Second, func(h *node, reply func(error)) { w.restartFailed(h.homes[r.Job], r.MID); reply(nil) },
			func(err error) { w.stepDstM(d, m, HomeTold{err}, nil) })
	default:
		return false
	}
	return true
}

// consent is the home's answer to a restart of its job on node on: only
// a job a checkpoint stopped, which no other restart has, and never a
// restart it decided or refused before (the agent's
// checkpoints.Checkpoints.Reopen): a late copy of a refused request,
// once the job stopped, would mark it restarting for a run that ended.
func (w *world) consent(hr *homeRec, mid string, on int) consentErr {
	switch {
	case hr.decided[mid] != "":
		w.counts["restart-refused"]++
		return consentErr{refused: true}
	case hr.restarting == mid: // a duplicate
		return consentErr{inc: hr.inc, moves: hr.seq}
	case hr.restarting != "" || !hr.ended:
		w.counts["restart-refused"]++
		hr.decided[mid] = Aborted
		return consentErr{refused: true}
	}
	hr.prev, hr.node, hr.restarting = hr.node, on, mid
	hr.inc++
	w.counts["restart-consented"]++
	return consentErr{inc: hr.inc, moves: hr.seq}
}

// commitRestart is the home's decision: committed while its mark is the
// restart's.
func (w *world) commitRestart(hr *homeRec, mid string) Outcome {
	if hr.restarting == mid {
		hr.restarting, hr.ended, hr.decided[mid] = "", false, Committed
	}
	if hr.decided[mid] == "" {
		hr.decided[mid] = Aborted
	}
	return hr.decided[mid]
}

// restartFailed is the home told a restart failed.
func (w *world) restartFailed(hr *homeRec, mid string) {
	if hr.decided[mid] == Committed {
		w.t.Fatalf("%s: the home is told restart %s failed, which it committed", w.now.Sub(t0), mid)
	}
	if hr.restarting == mid {
		hr.restarting, hr.node = "", hr.prev
	}
	hr.decided[mid] = Aborted
}

// restoring is what a restart's restore takes: the header the home's
// consent makes, and an error when the node's job table holds the job (a
// copy of it being killed, a lazy migration's source: the agent refuses
// to restore it there).
func (w *world) restoring(d *node, r InRecord) (hdrInfo, error) {
	w.noneRuns(r.Job, "restores")
	h := grantOf(r.Grant)
	h.moves-- // a restart is no move
	if _, ok := d.local[r.Job]; ok {
		return h, errors.New("job already here")
	}
	return h, nil
}

// noneRuns fails unless no copy of job runs anywhere.
func (w *world) noneRuns(job, what string) {
	for _, c := range w.copies {
		if c.job == job && c.running {
			w.t.Fatalf("%s: a restart %s job %s while it runs on node %d: %s", w.now.Sub(t0), what, job, c.node, w.describe(job))
		}
	}
}

// ---- the files' invariant ----

// checkFiles: a file under its final name is whole and sealed, and a
// checkpoint that decided has no file left on its node (delivered: it
// left with the delivery; aborted: removed).
func (w *world) checkFiles() {
	for _, n := range w.nodes {
		for mid, f := range n.files {
			if f.final && !f.complete {
				w.t.Fatalf("%s: node %d: checkpoint %s of job %s is under its final name, not whole", w.now.Sub(t0), n.id, mid, f.job)
			}
			if o := n.srcRecs[mid].Outcome; o != Pending {
				w.t.Fatalf("%s: node %d: checkpoint %s of job %s is %s, its file is left (final %v)", w.now.Sub(t0), n.id, mid, f.job, o, f.final)
			}
		}
	}
}

// checkSettledFiles: once settled, no node holds a checkpoint's file.
func (w *world) checkSettledFiles() {
	for _, n := range w.nodes {
		for mid, f := range n.files {
			w.t.Errorf("node %d: the file of checkpoint %s of job %s is left (final %v, whole %v)", n.id, mid, f.job, f.final, f.complete)
		}
	}
}
