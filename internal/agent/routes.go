package agent

// The agent's one table of routes: the CLI's, on the unix socket (each
// request checked against its caller's credentials), and the other
// agents', on the peer port (mutual TLS has proved the caller a member;
// its input is still checked). A call of this node to itself runs the
// peer routes in process (peer.Loopback, wired in agent.go).

import (
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/sched"
)

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
		httpx.WriteJSON(w, http.StatusOK, a.gossip.Nodes())
	})
	mux.HandleFunc("POST "+api.PathNodeDrain, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		if err := a.drain.Ask(c, r.PathValue("id"), r.URL.Query().Get("state")); err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, struct{}{})
	}))
	mux.HandleFunc("GET "+api.PathStats, func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, a.Stats())
	})
	mux.Handle("GET "+api.PathMetrics, promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+api.PathPolicy, func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, a.sched.Policies())
	})
	mux.HandleFunc("POST "+api.PathPolicy, httpx.CallerJSON(func(c Caller, req api.PolicyRequest) ([]api.NodePolicy, error) {
		return a.sched.LoadPolicy(c, req)
	}))
	mux.HandleFunc("GET "+api.PathPprof, httpx.CallerFunc(servePprof))
	mux.HandleFunc("GET "+api.PathEvents, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		httpx.EventsSince(func(since time.Time) []api.Event { return a.sched.Events(c, since) })(w, r)
	}))
}

// apiJobRoutes are the CLI's routes of jobs: run, output, stdin, kill,
// purge, ps, migrate and a sweep's view.
func apiJobRoutes(a *Agent, mux *http.ServeMux) {
	// a.launch and a.control are read at each call, not bound here, as in
	// peerJobRoutes: the fuzz harness builds them again for each input.
	mux.HandleFunc("POST "+api.PathRun, httpx.CallerJSON(func(c Caller, req api.RunRequest) (api.RunResponse, error) { return a.launch.Run(c, req) }))
	mux.HandleFunc("GET "+api.PathJobOutput, httpx.CallerFunc(a.news.ServeJobOutput))
	mux.HandleFunc("POST "+api.PathJobStdin, httpx.CallerFunc(a.news.ServeJobStdin))
	mux.HandleFunc("POST "+api.PathKill, httpx.CallerJSON(func(c Caller, req api.KillRequest) ([]api.KillResult, error) { return a.control.Kill(c, req) }))
	mux.HandleFunc("POST "+api.PathPurge, httpx.CallerJSON(a.news.Purge))
	mux.HandleFunc("GET "+api.PathPS, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		js, err := a.control.PS(c, q.Get("all") == "1", q["id"]...)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, js)
	}))
	mux.HandleFunc("POST "+api.PathMigrate, httpx.CallerJSON(func(c Caller, req api.MigrateRequest) (api.Migration, error) {
		return a.out.Migrate(c, req)
	}))
	mux.HandleFunc("GET "+api.PathSweep, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		s, err := a.control.Sweep(c, r.PathValue("id"))
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, s)
	}))
}

// apiCkptRoutes are the CLI's routes of checkpoints and restarts.
func apiCkptRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.PathCheckpoint, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		var req api.CheckpointRequest
		err := httpx.Decode(r, &req)
		if err == nil {
			err = a.checkpoints.Checkpoint(c, req, w) // writes the file when it returns nil
		}
		if err != nil {
			httpx.WriteError(w, err)
		}
	}))
	mux.HandleFunc("POST "+api.PathRestart, httpx.CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		body, stop := httpx.WatchedBody(w, r, peer.StallTimeout)
		res, err := a.checkpoints.Restart(c, r.URL.Query(), body, r.ContentLength)
		stop()
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}))
}

// servePprof is the agent's own profile (Go's pprof), for root: where a
// migration's time goes inside the agent. The profiles name other users'
// jobs.
func servePprof(c Caller, w http.ResponseWriter, r *http.Request) {
	if c.UID != 0 {
		httpx.WriteError(w, errkind.New(peer.ErrPermission, "pprof: only root profiles the agent"))
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
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"node": a.cfg.NodeID})
	})
	// jobs: a.launch and a.control are read at each call, not bound
	// here, for the fuzz harness builds them again for each input.
	mux.HandleFunc("POST "+peer.Start, httpx.JSONCall(func(req peer.StartRequest) ([]peer.StartResult, error) { return a.launch.StartHere(req), nil }))
	mux.HandleFunc("POST "+peer.Updates, httpx.JSONCall(a.news.TakeUpdates))
	mux.HandleFunc("POST "+peer.Signal, httpx.JSONCall(func(req peer.SignalRequest) (struct{}, error) { return a.control.PeerSignal(req) }))
	mux.HandleFunc("POST "+peer.Purge, httpx.JSONCall(a.news.PurgeLocal))
	mux.HandleFunc("POST "+peer.Stdin, a.news.ServeStdin)
	mux.HandleFunc("GET "+peer.Record, func(w http.ResponseWriter, r *http.Request) { a.control.ServeRecord(w, r) })
	mux.HandleFunc("GET "+peer.Output, a.news.ServeOutput)
	mux.HandleFunc("GET "+peer.PS, func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, a.control.Part())
	})
	mux.HandleFunc("GET "+peer.Sweep, func(w http.ResponseWriter, r *http.Request) { a.control.ServeSweep(w, r) })
	mux.HandleFunc("POST "+peer.Cancel, httpx.JSONCall(func(req peer.CancelRequest) ([]api.KillResult, error) { return a.control.Cancel(req) }))
	mux.HandleFunc("POST "+peer.Hold, httpx.QueryCall("id", func(id string) error { return a.sched.ReleaseHold(id) }))
	mux.HandleFunc("POST "+peer.Drain, httpx.QueryCall("state", func(state string) error { return a.drain.Set(state) }))
	mux.HandleFunc("POST "+peer.MigrateAdmit, httpx.JSONCall(func(mv sched.Move) (peer.AdmitAnswer, error) { return a.sched.Admit(mv) }))
	mux.HandleFunc("DELETE "+peer.MigrateAdmit, httpx.JSONCall(func(mv sched.Move) (peer.WithdrawAnswer, error) { return a.sched.Withdraw(mv) }))
	mux.HandleFunc("GET "+peer.Policy, func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, a.sched.Policy())
	})
	mux.HandleFunc("POST "+peer.Policy, httpx.JSONCall(func(req api.PolicyRequest) (api.NodePolicy, error) { return a.sched.TakePolicy(req) }))
	mux.HandleFunc("GET "+peer.Events, httpx.EventsSince(a.events.Since))
}

// peerMigrateRoutes are the peer routes of migrations. Each reaches the
// migration drivers as the request comes: the routes are made before the
// drivers, which use the peer client, which calls this node's own routes
// through them (Start, wireMigration).
func peerMigrateRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+peer.MigrateOut, httpx.JSONCall(func(req peer.MigrateOutRequest) (api.Migration, error) {
		return a.out.MigrateOut(req)
	}))
	mux.HandleFunc("POST "+peer.MigrateCheck, httpx.JSONCall(func(req peer.MigrateCheckRequest) (struct{}, error) {
		return struct{}{}, a.in.Check(req)
	}))
	mux.HandleFunc("POST "+peer.MigrateStream, func(w http.ResponseWriter, r *http.Request) { a.in.ServeStream(w, r) })
	mux.HandleFunc("GET "+peer.Pages, func(w http.ResponseWriter, r *http.Request) { a.pages.ServePages(w, r) })
	mux.HandleFunc("GET "+peer.MigrateSink, func(w http.ResponseWriter, r *http.Request) { a.pages.ServeSink(w, r) })
	mux.HandleFunc("POST "+peer.MigrateCommit, func(w http.ResponseWriter, r *http.Request) { a.in.ServeCommit(w, r) })
	mux.HandleFunc("POST "+peer.MigrateAbort, httpx.QueryCall("mid", func(mid string) error { return a.in.Abort(mid) }))
	mux.HandleFunc("GET "+peer.MigrateOutcome, func(w http.ResponseWriter, r *http.Request) { a.out.ServeOutcome(w, r) })
	mux.HandleFunc("POST "+peer.Note, httpx.JSONCall(func(n relay.Note) (struct{}, error) {
		return struct{}{}, a.out.TakeNote(n)
	}))
}

// peerCkptRoutes are the peer routes of checkpoints and restarts
// (package checkpoints). Each looks a.checkpoints up as a request comes:
// the mux is built before the job table the owner is made with (Start).
func peerCkptRoutes(a *Agent, mux *http.ServeMux) {
	mux.HandleFunc("POST "+peer.CkptTake, func(w http.ResponseWriter, r *http.Request) { a.checkpoints.ServeTake(w, r) })
	mux.HandleFunc("POST "+peer.CkptKeep, func(w http.ResponseWriter, r *http.Request) { a.checkpoints.ServeKeep(w, r) })
	mux.HandleFunc("POST "+peer.CkptDrop, func(w http.ResponseWriter, r *http.Request) { a.checkpoints.ServeDrop(w, r) })
	mux.HandleFunc("POST "+peer.CkptRestore, httpx.JSONCall(func(req reopen.Target) (api.RestartResponse, error) {
		return a.checkpoints.RestoreKept(req)
	}))
	mux.HandleFunc("POST "+peer.CkptPreempt, httpx.JSONCall(func(r peer.PreemptRequest) (peer.PreemptAnswer, error) { return a.checkpoints.Preempt(r) }))
	mux.HandleFunc("POST "+peer.Reopen, httpx.JSONCall(func(req reopen.Request) (reopen.Consent, error) { return a.checkpoints.Reopen(req) }))
	mux.HandleFunc("POST "+peer.ReopenCommit, httpx.JSONCall(func(c reopen.Commit) (map[string]string, error) { return a.checkpoints.Commit(c) }))
	mux.HandleFunc("POST "+peer.ReopenDone, httpx.JSONCall(func(d reopen.Failed) (struct{}, error) { return a.checkpoints.Failed(d) }))
	mux.HandleFunc("POST "+peer.Restore, func(w http.ResponseWriter, r *http.Request) { a.checkpoints.ServeRestore(w, r) })
}
