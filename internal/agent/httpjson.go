package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"roam/internal/agent/peer"
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
		return errkind.New(peer.ErrBadRequest, "request body: %v", err)
	}
	return nil
}

func sortJobs(js []api.Job) {
	sort.Slice(js, func(i, j int) bool {
		hi, si, _ := jobSeq(js[i].ID)
		hj, sj, _ := jobSeq(js[j].ID)
		if hi != hj {
			return sched.IDLess(hi, hj)
		}
		return si < sj
	})
}

// withCaller wraps a handler that needs the caller of the unix socket.
func withCaller(h func(Caller, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := callerOf(r)
		if !ok {
			writeError(w, errkind.New(peer.ErrPermission, "caller credentials unavailable"))
			return
		}
		h(c, w, r)
	}
}

// outputQuery reads an output poll's offsets (never negative) and wait.
func outputQuery(r *http.Request) (outOff, errOff int64, wait time.Duration) {
	q := r.URL.Query()
	outOff, _ = strconv.ParseInt(q.Get("out"), 10, 64)
	errOff, _ = strconv.ParseInt(q.Get("err"), 10, 64)
	wait, _ = time.ParseDuration(q.Get("wait"))
	return max(outOff, 0), max(errOff, 0), wait
}
