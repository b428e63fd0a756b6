package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/sched"
)

// maxBody bounds every request body the agent reads.
const maxBody = 8 << 20

// decode reads a JSON body, bounded; a bad body is a bad request.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		return errkind.New(ErrBadRequest, "request body: %v", err)
	}
	return nil
}

func sortJobs(js []api.Job) {
	sort.Slice(js, func(i, j int) bool {
		hi, _ := homeOf(js[i].ID)
		hj, _ := homeOf(js[j].ID)
		if hi != hj {
			return sched.IDLess(hi, hj)
		}
		si, _ := strconv.Atoi(js[i].ID[len(hi)+1:])
		sj, _ := strconv.Atoi(js[j].ID[len(hj)+1:])
		return si < sj
	})
}

// withCaller wraps a handler that needs the caller of the unix socket.
func withCaller(h func(Caller, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := callerOf(r)
		if !ok {
			writeError(w, errkind.New(ErrPermission, "caller credentials unavailable"))
			return
		}
		h(c, w, r)
	}
}

// jobAPI registers the CLI's job endpoints.
func (a *Agent) jobAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/run", callerJSON(a.Run))
	mux.HandleFunc("GET /v1/jobs/{id}/output", withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		rec, err := a.record(id)
		if err != nil {
			writeError(w, err)
			return
		}
		if !canTouch(c, rec.UID) {
			writeError(w, errkind.New(ErrPermission, "%s: permission denied", id))
			return
		}
		out, errOff, wait := outputQuery(r)
		var o api.Output
		if err := a.peerCall(rec.Home, http.MethodGet, fmt.Sprintf("/v1/peer/output?id=%s&out=%d&err=%d&wait=%s", id, out, errOff, wait), nil, &o); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, o)
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/stdin", withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err == nil {
			err = a.Stdin(c, r.PathValue("id"), data, r.URL.Query().Get("eof") == "1")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}))
	mux.HandleFunc("POST /v1/kill", callerJSON(a.Kill))
	mux.HandleFunc("GET /v1/ps", withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.PS(c, r.URL.Query().Get("all") == "1"))
	}))
}

// peerJobAPI registers the endpoints other agents call. mTLS has already
// proved the caller a member; the input is still checked.
func (a *Agent) peerJobAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/peer/start", func(w http.ResponseWriter, r *http.Request) {
		var req startRequest
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, a.startLocal(req))
	})
	mux.HandleFunc("POST /v1/peer/updates", func(w http.ResponseWriter, r *http.Request) {
		var ups []update
		if err := decode(r, &ups); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, a.takeUpdates(ups))
	})
	mux.HandleFunc("POST /v1/peer/signal", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     string `json:"id"`
			Signal int    `json:"signal"`
		}
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
		if req.Signal < 1 || req.Signal > 64 {
			writeError(w, errkind.New(ErrBadRequest, "signal %d", req.Signal))
			return
		}
		if err := a.signalJob(req.ID, syscall.Signal(req.Signal)); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("POST /v1/peer/stdin", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err == nil {
			err = a.stdinLocal(r.URL.Query().Get("id"), data, r.URL.Query().Get("eof") == "1")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("GET /v1/peer/record", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if h, ok := homeOf(id); !ok || h != a.cfg.NodeID {
			writeError(w, errkind.New(ErrNotFound, "job %s does not have its home here", id))
			return
		}
		rec, err := a.homeRecord(id)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
	mux.HandleFunc("GET /v1/peer/output", func(w http.ResponseWriter, r *http.Request) {
		out, errOff, wait := outputQuery(r)
		o, err := a.Output(r.URL.Query().Get("id"), out, errOff, wait)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
	mux.HandleFunc("GET /v1/peer/ps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.psLocal())
	})
}

// outputQuery reads an output poll's offsets (never negative) and wait.
func outputQuery(r *http.Request) (outOff, errOff int64, wait time.Duration) {
	q := r.URL.Query()
	outOff, _ = strconv.ParseInt(q.Get("out"), 10, 64)
	errOff, _ = strconv.ParseInt(q.Get("err"), 10, 64)
	wait, _ = time.ParseDuration(q.Get("wait"))
	return max(outOff, 0), max(errOff, 0), wait
}
