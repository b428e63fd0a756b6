package launch

// Starting a run's processes: the home asks each chosen node for its
// share, and each node starts what it was asked.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/cpufeat"
	"roam/internal/job"
	"roam/internal/migrate"
)

// nodeStart is one node's answer to a start of its specs.
type nodeStart struct {
	node string
	res  []peer.StartResult
	err  error
}

// nodeStarts asks every node to start its specs, all at once (each node
// starts its share in turn); its answers come on the channel returned,
// one a node, as they come.
func (s *Starter) nodeStarts(byNode map[string][]job.Spec) <-chan nodeStart {
	results := make(chan nodeStart, len(byNode))
	for node, specs := range byNode {
		go func() {
			res, err := s.startOn(node, specs)
			results <- nodeStart{node, res, err}
		}()
	}
	return results
}

// startAllAt starts every node's specs at once (each node starts its
// share in turn), and returns when each job started, by this node's clock
// (the job's record's start). When any fails to start, it kills those that
// did and returns the first error. A node whose answer never came may
// have started its share: those are killed too, by id. Should that node
// be out of reach now, its next heartbeat finds the home without their
// records and it ends them itself (ack.Gone), so nothing of a failed run
// is left.
func (s *Starter) startAllAt(byNode map[string][]job.Spec) (map[string]time.Time, error) {
	results := s.nodeStarts(byNode)
	type placed struct{ node, id string }
	var ok []placed
	starts := map[string]time.Time{}
	var firstErr error
	for range byNode {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("node %s: %w", r.node, r.err)
		}
		if r.err != nil {
			answered := map[string]bool{}
			for _, x := range r.res {
				answered[x.ID] = true
			}
			for _, sp := range byNode[r.node] {
				if !answered[sp.ID] {
					ok = append(ok, placed{r.node, sp.ID})
				}
			}
		}
		for _, x := range r.res {
			if x.Error != "" && firstErr == nil {
				firstErr = fmt.Errorf("node %s: %s", r.node, x.Error)
			}
			if x.Error == "" {
				ok = append(ok, placed{r.node, x.ID})
				starts[x.ID] = x.At
			}
		}
	}
	if firstErr != nil {
		// Leave nothing behind: end what did start, where it started, all
		// at once (a node that hangs holds up only its own kills).
		var wg sync.WaitGroup
		for _, st := range ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.cfg.Peers.Call(st.node, http.MethodPost, peer.Signal, peer.SignalRequest{ID: st.id, Signal: int(syscall.SIGKILL)}, nil)
			}()
		}
		wg.Wait()
	}
	return starts, firstErr
}

// startOn has node (this one or a peer) start specs, in requests no larger
// than a peer reads (startBatch), one after the other, each answer with
// its start by this node's clock (At). On an error it returns the results
// of the requests before it.
func (s *Starter) startOn(node string, specs []job.Spec) ([]peer.StartResult, error) {
	var out []peer.StartResult
	for len(specs) > 0 {
		n := startBatchLen(specs)
		req := peer.StartRequest{Home: s.cfg.Self, HomeAddr: s.cfg.Peers.SelfAddr, Jobs: specs[:n]}
		var res []peer.StartResult
		sent := time.Now()
		if err := s.cfg.Peers.Call(node, http.MethodPost, peer.Start, req, &res); err != nil {
			return out, err
		}
		got := time.Now()
		for _, x := range res {
			x.At = got.Add(-min(max(x.Ago, 0), got.Sub(sent)))
			out = append(out, x)
		}
		specs = specs[n:]
	}
	return out, nil
}

// startBatchLen is how many of specs, at least one, take no more than
// startBatch bytes of JSON.
func startBatchLen(specs []job.Spec) int {
	size := 0
	for i, sp := range specs {
		b, _ := json.Marshal(sp)
		size += len(b) + 1
		if size > startBatch && i > 0 {
			return i
		}
	}
	return len(specs)
}

// refuse says why this node does not start sp of req ("": it does): it
// drains, the job id is not its home's, the home's address or the
// request is bad, or its memory has no room here. Room is judged here,
// against what the node holds now (the home placed the job from a load
// entry up to a second old), and held for the job (jobtable.ReserveMem)
// until it is a local job or its start failed.
func (s *Starter) refuse(req peer.StartRequest, sp job.Spec, draining bool, addrErr error) string {
	switch h, ok := migrate.JobHome(sp.ID); {
	case draining:
		return "node " + s.cfg.Self + " is draining: it starts no job"
	case !ok || h != req.Home:
		return "bad job id " + strconv.Quote(sp.ID) + " for home " + strconv.Quote(req.Home)
	case addrErr != nil:
		return "bad home address " + strconv.Quote(req.HomeAddr)
	}
	if err := sp.Req.Check(); err != nil {
		return err.Error()
	}
	if err := s.cfg.Jobs.ReserveMem(s.cfg.Self, sp.ID, sp.Req, s.cfg.JobMem, s.cfg.Admitted(sp.ID)); err != nil {
		return "job " + sp.ID + ": " + err.Error()
	}
	return ""
}

// startWindow is how many jobs of one request a node starts at once. A
// start mostly waits for its roam-init, which waits on the kernel (a
// clone into new namespaces, cgroup moves, an exec), so a few at once
// keep a node's cores busy; each takes its own memory and a process, and
// the requests' order is kept for reserving room (refuse).
const startWindow = 4

// ownCPU is what this node's CPU offers (its metadata, in the members
// table): a job started here may use any of it, and its image runs only
// where a CPU has as much.
func (s *Starter) ownCPU() cpufeat.Set {
	m, _ := s.cfg.Members.Get(s.cfg.Self)
	return m.Host.CPU
}

// StartHere is /v1/peer/start: it starts jobs on this node for their
// home, and answers for each.
func (s *Starter) StartHere(req peer.StartRequest) []peer.StartResult {
	out, procs, began := s.startJobs(req)
	var locals []job.Local
	var stdins []*os.File
	for i, p := range procs {
		if p == nil || out[i].Error != "" {
			continue
		}
		sp := req.Jobs[i]
		l := job.Local{ID: sp.ID, Home: req.Home, HomeAddr: req.HomeAddr, UID: sp.UID, GID: sp.GID, Groups: sp.Groups, PID: p.PID, StartTix: p.StartTix, Dir: p.Dir, Started: began[i],
			CheckpointEvery: sp.CheckpointEvery, Req: sp.Req, CPU: s.ownCPU(), Slurm: sp.Slurm, Within: sp.Within}
		if sp.Pin {
			l.Hold = migrate.HoldPin
		}
		locals, stdins = append(locals, l), append(stdins, p.Stdin)
	}
	if err := s.cfg.Jobs.AddLocals(locals, stdins, time.Now()); err != nil {
		s.unrecorded(out, procs, err)
	}
	s.cfg.Jobs.KickPush() // wake the push loop if it slept with no jobs
	s.cfg.Rounds.Kick()
	for _, p := range procs {
		if p == nil {
			continue
		}
		go func(p *job.Proc) {
			_ = p.Wait() // reap; the status file says how it ended
			s.cfg.Jobs.KickPush()
			s.cfg.Rounds.Kick()
		}(p)
	}
	for i := range out {
		if procs[i] != nil && out[i].Error == "" {
			out[i].Ago = time.Since(began[i])
		}
	}
	return out
}

// end ends a job just started that this node will not record: its
// process, its stdin, its spool and its room. (Its process is still
// reaped, as every started one.)
func (s *Starter) end(p *job.Proc, id string) {
	s.cfg.Procs.Kill(p.PID, p.StartTix, 5*time.Second)
	if p.Stdin != nil {
		p.Stdin.Close()
	}
	os.RemoveAll(p.Dir)
	s.cfg.Jobs.Unreserve(id)
}

// unrecorded ends the jobs just started whose local records the store
// refused (err), and answers each with the error: a job this node has no
// record of would run on untracked after the agent's restart. Their
// homes then fail or queue them again, as any refused start. (Their
// processes are still reaped, as every started one.)
func (s *Starter) unrecorded(out []peer.StartResult, procs []*job.Proc, err error) {
	s.cfg.Log.Error("job table: jobs started here not recorded; ending them", "err", err)
	for i, p := range procs {
		if p == nil || out[i].Error != "" {
			continue
		}
		s.end(p, out[i].ID)
		out[i] = peer.StartResult{ID: out[i].ID, Error: "record the job on node " + s.cfg.Self + ": " + err.Error()}
	}
}

// startJobs starts req's jobs, startWindow at once, each once this node
// has room for it: its answer, its process (nil: not started) and when
// it started. While they start, the state disk's reserve is held over
// them (batch).
func (s *Starter) startJobs(req peer.StartRequest) ([]peer.StartResult, []*job.Proc, []time.Time) {
	b := s.newBatch(req)
	// Job ids name spool directories and cgroups: HOME.SEQ with HOME a
	// node id, and HOME the requester's.
	_, addrErr := netip.ParseAddrPort(req.HomeAddr)
	draining := s.cfg.Draining()
	window := make(chan struct{}, startWindow)
	var wg sync.WaitGroup
	stop := b.watch()
	for i, sp := range req.Jobs {
		why := b.diskRefusal(i)
		if why == "" {
			why = s.refuse(req, sp, draining, addrErr)
		}
		if why != "" {
			b.refused(i, why)
			continue
		}
		window <- struct{}{}
		wg.Go(func() {
			defer func() { <-window }()
			p, err := s.cfg.Procs.Start(sp)
			b.started(i, p, err)
		})
	}
	wg.Wait()
	stop()
	return b.out, b.procs, b.began
}
