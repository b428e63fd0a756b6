package agent

// The agent's one table of routes: the CLI's, on the unix socket (each
// request checked against its caller's credentials), and the other
// agents', on the peer port (mutual TLS has proved the caller a member;
// its input is still checked). A call of this node to itself runs the
// peer routes in process (peer.go).

import (
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/agent/stall"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// maxStdinPost bounds one stdin post: a pipe takes no more at once.
const maxStdinPost = 1 << 20

// readStdinPost reads a stdin post's bytes, refusing more than
// maxStdinPost.
func readStdinPost(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxStdinPost+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStdinPost {
		return nil, errkind.New(peer.ErrBadRequest, "stdin: more than %d bytes in one post", maxStdinPost)
	}
	return data, nil
}

// apiRoutes are the CLI's, on the paths of package api (api/routes.go).
func (a *Agent) apiRoutes(mux *http.ServeMux) {
	apiNodeRoutes(a, mux)
	apiJobRoutes(a, mux)
	apiCkptRoutes(a, mux)
}

// apiNodeRoutes are the CLI's routes of the nodes, the scheduler and the
// agent itself. The scheduling's handlers take a.gossip, a.sched and
// a.drain at each request, not when the table is built: Start builds
// the peer routes before them, and the fuzz harness builds them anew
// for each input, keeping its tables.
func apiNodeRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("GET "+api.PathNodes, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.gossip.Nodes())
	})
	mux.HandleFunc("POST "+api.PathNodeDrain, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		if err := a.drain.Ask(c, r.PathValue("id"), r.URL.Query().Get("state")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}))
	mux.HandleFunc("GET "+api.PathStats, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Stats())
	})
	mux.Handle("GET "+api.PathMetrics, promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+api.PathPolicy, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.sched.Policies())
	})
	mux.HandleFunc("POST "+api.PathPolicy, callerJSON(func(c Caller, req api.PolicyRequest) ([]api.NodePolicy, error) {
		return a.sched.LoadPolicy(c, req)
	}))
	mux.HandleFunc("GET "+api.PathPprof, withCaller(servePprof))
	mux.HandleFunc("GET "+api.PathEvents, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		eventsSince(func(since time.Time) []api.Event { return a.sched.Events(c, since) })(w, r)
	}))
}

// apiJobRoutes are the CLI's routes of jobs: run, output, stdin, kill,
// purge, ps and migrate.
func apiJobRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.PathRun, callerJSON(a.Run))
	mux.HandleFunc("GET "+api.PathJobOutput, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		out, errOff, wait := outputQuery(r)
		o, err := a.jobOutput(c, r.PathValue("id"), out, errOff, wait)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, o)
	}))
	mux.HandleFunc("POST "+api.PathJobStdin, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		data, err := readStdinPost(r)
		var res api.StdinResult
		if err == nil {
			res, err = a.Stdin(c, r.PathValue("id"), data, r.URL.Query().Get("eof") == "1")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
	mux.HandleFunc("POST "+api.PathKill, callerJSON(a.Kill))
	mux.HandleFunc("POST "+api.PathPurge, callerJSON(a.Purge))
	mux.HandleFunc("GET "+api.PathPS, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.PS(c, r.URL.Query().Get("all") == "1"))
	}))
	mux.HandleFunc("POST "+api.PathMigrate, callerJSON(a.Migrate))
}

// apiCkptRoutes are the CLI's routes of checkpoints and restarts.
func apiCkptRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.PathCheckpoint, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		var req api.CheckpointRequest
		err := decode(r, &req)
		if err == nil {
			err = a.Checkpoint(c, req, w) // writes the file when it returns nil
		}
		if err != nil {
			writeError(w, err)
		}
	}))
	mux.HandleFunc("POST "+api.PathRestart, withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		body, stop := watchedBody(w, r)
		res, err := a.Restart(c, r.URL.Query().Get("on"), body, r.ContentLength)
		stop()
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}

// servePprof is the agent's own profile (Go's pprof), for root: where a
// migration's time goes inside the agent. The profiles name other users'
// jobs.
func servePprof(c Caller, w http.ResponseWriter, r *http.Request) {
	if c.UID != 0 {
		writeError(w, errkind.New(peer.ErrPermission, "pprof: only root profiles the agent"))
		return
	}
	switch r.PathValue("name") {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	default:
		pprof.Index(w, r)
	}
}

// jobOutput is `roam run`'s and `roam logs`' read of a job's output, from
// its home, for a caller who may read it.
func (a *Agent) jobOutput(c Caller, id string, out, errOff int64, wait time.Duration) (api.Output, error) {
	rec, err := a.record(id)
	if err != nil {
		return api.Output{}, err
	}
	if !canTouch(c, rec.UID) {
		return api.Output{}, errkind.New(peer.ErrPermission, "%s: permission denied", id)
	}
	var o api.Output
	err = a.peers.Call(rec.Home, http.MethodGet, peer.Output+fmt.Sprintf("?id=%s&out=%d&err=%d&wait=%s", id, out, errOff, wait), nil, &o)
	return o, err
}

// peerRoutes are the other agents'.
func (a *Agent) peerRoutes(mux *http.ServeMux) {
	peerJobRoutes(a, mux)
	peerMigrateRoutes(a, mux)
	peerCkptRoutes(a, mux)
}

// peerJobRoutes are the peer routes of jobs, the scheduler and the node.
// The scheduling's handlers take a.sched and a.drain at each request
// (apiNodeRoutes says why).
func peerJobRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("GET "+peer.Ping, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"node": a.cfg.NodeID})
	})
	// jobs
	mux.HandleFunc("POST "+peer.Start, jsonCall(func(req startRequest) ([]startResult, error) { return a.startLocal(req), nil }))
	mux.HandleFunc("POST "+peer.Updates, jsonCall(a.takeUpdates))
	mux.HandleFunc("POST "+peer.Signal, jsonCall(a.peerSignal))
	mux.HandleFunc("POST "+peer.Purge, jsonCall(a.purgeLocal))
	mux.HandleFunc("POST "+peer.Stdin, func(w http.ResponseWriter, r *http.Request) {
		data, err := readStdinPost(r)
		var res api.StdinResult
		if err == nil {
			res, err = a.stdinLocal(r.URL.Query().Get("id"), data, r.URL.Query().Get("eof") == "1")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET "+peer.Record, a.serveRecord)
	mux.HandleFunc("GET "+peer.Output, func(w http.ResponseWriter, r *http.Request) {
		out, errOff, wait := outputQuery(r)
		o, err := a.Output(r.URL.Query().Get("id"), out, errOff, wait)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
	mux.HandleFunc("GET "+peer.PS, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.psLocal())
	})
	mux.HandleFunc("POST "+peer.Hold, queryCall("id", func(id string) error { return a.sched.ReleaseHold(id) }))
	mux.HandleFunc("POST "+peer.Drain, queryCall("state", func(state string) error { return a.drain.Set(state) }))
	mux.HandleFunc("POST "+peer.MigrateAdmit, jsonCall(func(mv sched.Move) (peer.AdmitAnswer, error) { return a.sched.Admit(mv) }))
	mux.HandleFunc("DELETE "+peer.MigrateAdmit, jsonCall(func(mv sched.Move) (peer.WithdrawAnswer, error) { return a.sched.Withdraw(mv) }))
	mux.HandleFunc("GET "+peer.Policy, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.sched.Policy())
	})
	mux.HandleFunc("POST "+peer.Policy, jsonCall(func(req api.PolicyRequest) (api.NodePolicy, error) { return a.sched.TakePolicy(req) }))
	mux.HandleFunc("GET "+peer.Events, eventsSince(a.events.Since))
}

// peerMigrateRoutes are the peer routes of migrations.
func peerMigrateRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+peer.MigrateOut, jsonCall(a.migrateOut))
	mux.HandleFunc("POST "+peer.MigrateCheck, jsonCall(func(req migrateCheckRequest) (struct{}, error) {
		return struct{}{}, a.migrateCheck(req)
	}))
	mux.HandleFunc("POST "+peer.MigrateStream, a.serveMigrateIn)
	mux.HandleFunc("GET "+peer.Pages, a.servePages)
	mux.HandleFunc("GET "+peer.MigrateSink, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"error": a.sinkError(r.URL.Query().Get("mid"))})
	})
	mux.HandleFunc("POST "+peer.MigrateCommit, func(w http.ResponseWriter, r *http.Request) {
		ph, err := a.stepIn(r.URL.Query().Get("mid"), migrate.CommitMsg{})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, migrateCommitted{Phases: ph})
	})
	mux.HandleFunc("POST "+peer.MigrateAbort, queryCall("mid", func(mid string) error {
		_, err := a.stepIn(mid, migrate.AbortMsg{})
		return err
	}))
	mux.HandleFunc("GET "+peer.MigrateOutcome, func(w http.ResponseWriter, r *http.Request) {
		o, err := a.outcome(r.URL.Query().Get("mid"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"outcome": string(o)})
	})
	mux.HandleFunc("POST "+peer.Note, jsonCall(func(n relay.Note) (struct{}, error) {
		return struct{}{}, a.takeNote(n)
	}))
}

// peerCkptRoutes are the peer routes of checkpoints and restarts.
func peerCkptRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+peer.CkptTake, a.servePeerCheckpoint)
	mux.HandleFunc("POST "+peer.CkptKeep, a.servePeerKeep)
	mux.HandleFunc("POST "+peer.CkptDrop, func(w http.ResponseWriter, r *http.Request) {
		var before time.Time
		if b := r.URL.Query().Get("before"); b != "" {
			var err error
			if before, err = time.Parse(time.RFC3339Nano, b); err != nil {
				writeError(w, errkind.New(peer.ErrBadRequest, "before: %v", err))
				return
			}
		}
		if err := a.keeper.Drop(r.URL.Query().Get("id"), before); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("POST "+peer.CkptRestore, jsonCall(func(req reopen.Target) (api.RestartResponse, error) {
		if h, ok := migrate.JobHome(req.ID); !ok || h != req.Home || req.On == "" || len(req.Why) > maxWhy || len(req.Lost) > maxWhy {
			return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restore of job %q: bad request", relay.LimitText(req.ID))
		}
		// A link of its own: a newer file kept meanwhile replaces the
		// name, not what is checked and restored.
		f, err := a.keeper.Open(req.ID, newMID(), a.cfg.NodeID)
		if err != nil {
			return api.RestartResponse{}, err
		}
		return a.restoreOn(req.On, f, req)
	}))
	mux.HandleFunc("POST "+peer.Reopen, jsonCall(a.reopen))
	mux.HandleFunc("POST "+peer.ReopenCommit, jsonCall(func(c reopen.Commit) (map[string]string, error) {
		if !migrate.ValidMID(c.MID) {
			return nil, errkind.New(peer.ErrBadRequest, "restart run id %q", relay.LimitText(c.MID))
		}
		return map[string]string{"outcome": string(a.jobs.CommitRestart(c.ID, c.MID))}, nil
	}))
	mux.HandleFunc("POST "+peer.ReopenDone, jsonCall(func(d reopen.Failed) (struct{}, error) {
		if !migrate.ValidMID(d.MID) {
			return struct{}{}, errkind.New(peer.ErrBadRequest, "restart run id %q", relay.LimitText(d.MID))
		}
		a.log.Warn("restart failed", "job", relay.LimitText(d.ID), "mid", d.MID, "err", relay.LimitText(d.Error))
		return struct{}{}, a.jobs.ReopenEnded(d, time.Now())
	}))
	mux.HandleFunc("POST "+peer.Restore, a.serveRestore)
}

// peerSignal is /v1/peer/signal: a signal for a job running here.
func (a *Agent) peerSignal(req signalRequest) (struct{}, error) {
	if req.Signal < 1 || req.Signal > 64 {
		return struct{}{}, errkind.New(peer.ErrBadRequest, "signal %d", req.Signal)
	}
	return struct{}{}, a.signalJob(req.ID, syscall.Signal(req.Signal))
}

type signalRequest struct {
	ID     string `json:"id"`
	Signal int    `json:"signal"`
}

// serveRecord is /v1/peer/record: a job's record at its home.
func (a *Agent) serveRecord(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if h, ok := migrate.JobHome(id); !ok || h != a.cfg.NodeID {
		writeError(w, errkind.New(peer.ErrNotFound, "job %s does not have its home here", id))
		return
	}
	rec, err := a.jobs.HomeRecord(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// serveMigrateIn is /v1/peer/migrate: a migration's stream. A read that
// makes no progress for stallTimeout ends the transfer (the source's link
// went down, or it died).
func (a *Agent) serveMigrateIn(w http.ResponseWriter, r *http.Request) {
	body, stop := watchedBody(w, r)
	ready, err := a.migrateIn(body)
	stop()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ready)
}

// watchedBody is r's body, cut off when a read makes no progress for
// stallTimeout (the sender's link went down, or it died); stop ends the
// watch.
func watchedBody(w http.ResponseWriter, r *http.Request) (io.Reader, func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // bodyWithin's: the watch bounds it
	wd := stall.Watch(stallTimeout, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
	return stall.NewReader(r.Body, wd), wd.Stop
}
