package news

// A job's stdin: posted to any node's CLI route (ServeJobStdin), passed to
// the node the job runs on (ServeStdin), and on to the node it moved to
// if it moved meanwhile.

import (
	"bytes"
	"io"
	"net/http"
	"net/url"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
)

// ServeJobStdin is api.PathJobStdin: bytes for a job's stdin (Stdin).
func (r *Relay) ServeJobStdin(c httpx.Caller, w http.ResponseWriter, req *http.Request) {
	data, err := readStdinPost(req)
	var res api.StdinResult
	if err == nil {
		res, err = r.Stdin(c, req.PathValue("id"), data, req.URL.Query().Get("eof") == "1")
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

// ServeStdin is peer.Stdin: bytes for the stdin of a job running here
// (stdinLocal).
func (r *Relay) ServeStdin(w http.ResponseWriter, req *http.Request) {
	data, err := readStdinPost(req)
	var res api.StdinResult
	if err == nil {
		res, err = r.stdinLocal(req.URL.Query().Get("id"), data, req.URL.Query().Get("eof") == "1")
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

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

// Stdin passes bytes to a job's stdin; eof closes it.
func (r *Relay) Stdin(c httpx.Caller, id string, data []byte, eof bool) (api.StdinResult, error) {
	rec, err := r.c.Record(id)
	if err != nil {
		return api.StdinResult{}, err
	}
	if !c.MayAct(rec.UID) {
		return api.StdinResult{}, errkind.New(peer.ErrPermission, "%s: permission denied", id)
	}
	if rec.State == job.StatePending {
		return api.StdinResult{Pending: true}, nil
	}
	return r.stdinOn(rec.Node, id, data, eof)
}

// stdinOn passes bytes to the stdin of job id, which runs on node.
func (r *Relay) stdinOn(node, id string, data []byte, eof bool) (api.StdinResult, error) {
	q := peer.Stdin + "?id=" + url.QueryEscape(id)
	if eof {
		q += "&eof=1"
	}
	var res api.StdinResult
	err := r.c.Peers.Call(node, http.MethodPost, q, bytes.NewReader(data), &res)
	return res, err
}

// stdinLocal passes bytes to the stdin of a job running here, or on to
// the node it moved to.
func (r *Relay) stdinLocal(id string, data []byte, eof bool) (api.StdinResult, error) {
	if movedTo := r.c.MovedTo(id); movedTo != "" {
		return r.stdinOn(movedTo, id, data, eof)
	}
	// What the pipe takes now, and no more: a job that does not read its
	// stdin holds no buffer and no goroutine of the agent's, whatever is
	// sent to it. The pipe's contents move with the job.
	n, found, err := r.c.Jobs.WriteStdin(id, data, eof)
	switch {
	case !found:
		return api.StdinResult{}, errkind.New(peer.ErrNotFound, "job %s takes no stdin here", id)
	case err != nil:
		return api.StdinResult{Accepted: n}, errkind.New(peer.ErrUnavailable, "stdin of job %s: %v", id, err)
	}
	return api.StdinResult{Accepted: n}, nil
}
