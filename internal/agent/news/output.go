package news

// A job's output, read at its home: by `roam run` and `roam logs`
// through the CLI's route on any node (ServeJobOutput), which asks the
// home (ServeOutput).

import (
	"fmt"
	"net/http"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// ServeJobOutput is api.PathJobOutput: a job's output from its home, for
// a caller who may read it.
func (r *Relay) ServeJobOutput(c httpx.Caller, w http.ResponseWriter, req *http.Request) {
	out, errOff, wait := httpx.OutputQuery(req)
	o, err := r.JobOutput(c, req.PathValue("id"), out, errOff, wait)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, o)
}

// JobOutput is `roam run`'s and `roam logs`' read of a job's output, from
// its home, for a caller who may read it.
func (r *Relay) JobOutput(c httpx.Caller, id string, out, errOff int64, wait time.Duration) (api.Output, error) {
	rec, err := r.c.Record(id)
	if err != nil {
		return api.Output{}, err
	}
	if !c.MayAct(rec.UID) {
		return api.Output{}, errkind.New(peer.ErrPermission, "%s: permission denied", id)
	}
	var o api.Output
	err = r.c.Peers.Call(rec.Home, http.MethodGet, peer.Output+fmt.Sprintf("?id=%s&out=%d&err=%d&wait=%s", id, out, errOff, wait), nil, &o)
	return o, err
}

// ServeOutput is peer.Output: a home job's output (Output).
func (r *Relay) ServeOutput(w http.ResponseWriter, req *http.Request) {
	out, errOff, wait := httpx.OutputQuery(req)
	o, err := r.Output(req.URL.Query().Get("id"), out, errOff, wait)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, o)
}

// Output returns a home job's output from the given offsets, waiting up to
// wait for news when there is none.
func (r *Relay) Output(id string, outOff, errOff int64, wait time.Duration) (api.Output, error) {
	deadline := time.Now().Add(min(wait, maxWait))
	for {
		rec, ch, ok := r.c.Jobs.HomeWait(id)
		if !ok {
			return api.Output{}, errkind.New(peer.ErrNotFound, "unknown job %s", id)
		}

		o := api.Output{ID: id, State: rec.State, Ended: rec.Over(), ExitCode: rec.ExitCode, Node: rec.Node, LostAt: rec.LostAt, Inc: rec.Inc, Cut: rec.OutputCut}
		if n := len(rec.Restarts); n > 0 {
			o.Restart = &rec.Restarts[n-1]
		}
		o.Stdout, _ = r.c.Spools.Read(id, "stdout", outOff, outputChunk)
		o.Stderr, _ = r.c.Spools.Read(id, "stderr", errOff, outputChunk)
		o.StdoutOff = outOff + int64(len(o.Stdout))
		o.StderrOff = errOff + int64(len(o.Stderr))
		if len(o.Stdout) > 0 || len(o.Stderr) > 0 || o.Ended || time.Now().After(deadline) {
			if len(o.Stdout) > 0 || len(o.Stderr) > 0 {
				// More may be waiting: not ended until it is all read.
				o.Ended, o.ExitCode = false, nil
			}
			return o, nil
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		case <-r.c.Stop:
			return o, nil
		}
	}
}
