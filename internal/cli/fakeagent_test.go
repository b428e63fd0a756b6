package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"roam/internal/api"
)

// fakeAgent answers the user API on a unix socket as an agent would, from
// what the test sets: the CLI's side of each route (its flags, its
// output, its exit status), tested without agents. What a job does comes
// from jobs, by index of its roam run.
type fakeAgent struct {
	sock string
	mu   sync.Mutex
	// jobs are the jobs the next run starts, in order.
	jobs []fakeJob
	// started are the jobs run started, by id.
	started map[string]*fakeJob
	order   []string
	// refuse makes every route but output answer this error (400).
	refuse string
	// outputErr makes the output route answer this error (404);
	// overRate makes it answer so many requests past the request rate
	// (429), and limited counts them.
	outputErr         string
	overRate, limited int
	// kills are the kill requests taken.
	kills  []api.KillRequest
	events []api.Event
	nodes  []api.NodeInfo
}

// fakeJob is a job of the fake agent: its output and how it ends (exit
// code, or lost with its node).
type fakeJob struct {
	node           string
	stdout, stderr string
	exit           int
	lost           bool
	state          string // for ps; "finished" when empty
	cut            string // what of its output its home lacks
}

func startFakeAgent(t *testing.T, jobs ...fakeJob) *fakeAgent {
	t.Helper()
	f := &fakeAgent{sock: filepath.Join(t.TempDir(), "roamd.sock"), jobs: jobs, started: map[string]*fakeJob{}}
	f.nodes = []api.NodeInfo{{ID: "1", Alive: true, Self: true}, {ID: "2", Alive: true}, {ID: "3"}}
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.mux()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *fakeAgent) mux() *http.ServeMux {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	refused := func(w http.ResponseWriter) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refuse == "" {
			return false
		}
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(api.Error{Error: f.refuse})
		return true
	}
	mux.HandleFunc("POST "+api.PathRun, func(w http.ResponseWriter, r *http.Request) {
		if refused(w) {
			return
		}
		var req api.RunRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		var resp api.RunResponse
		for i := 0; i < req.Count && i < len(f.jobs); i++ {
			id := "1." + strconv.Itoa(len(f.order)+1)
			j := f.jobs[i]
			f.started[id], f.order = &j, append(f.order, id)
			resp.IDs, resp.Nodes = append(resp.IDs, id), append(resp.Nodes, j.node)
		}
		f.mu.Unlock()
		answer(w, resp)
	})
	mux.HandleFunc("GET "+api.PathJobOutput, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		j, ok := f.started[r.PathValue("id")]
		oerr := f.outputErr
		over := f.limited < f.overRate
		if over {
			f.limited++
		}
		f.mu.Unlock()
		if over {
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(api.Error{Error: "too many requests: a user may make 200 a second (limits.requests_per_second)"})
			return
		}
		if !ok || oerr != "" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.Error{Error: "unknown job " + r.PathValue("id") + oerr})
			return
		}
		out, _ := strconv.Atoi(r.URL.Query().Get("out"))
		errOff, _ := strconv.Atoi(r.URL.Query().Get("err"))
		o := api.Output{ID: r.PathValue("id"), Stdout: []byte(j.stdout[min(out, len(j.stdout)):]), Stderr: []byte(j.stderr[min(errOff, len(j.stderr)):]),
			StdoutOff: int64(len(j.stdout)), StderrOff: int64(len(j.stderr)), Ended: true, Node: j.node, Cut: j.cut}
		if j.lost {
			o.State = api.StateLost
		} else {
			o.State, o.ExitCode = api.StateFinished, &j.exit
		}
		answer(w, o)
	})
	mux.HandleFunc("POST "+api.PathKill, func(w http.ResponseWriter, r *http.Request) {
		var req api.KillRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.kills = append(f.kills, req)
		var res []api.KillResult
		for _, id := range req.IDs {
			kr := api.KillResult{ID: id}
			if _, ok := f.started[id]; !ok {
				kr.Error = "unknown job " + id
			}
			res = append(res, kr)
		}
		f.mu.Unlock()
		answer(w, res)
	})
	mux.HandleFunc("GET "+api.PathPS, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		js := []api.Job{}
		for _, id := range f.order {
			j := f.started[id]
			state := j.state
			if state == "" {
				state = api.StateFinished
			}
			js = append(js, api.Job{ID: id, Node: j.node, State: state, Cmd: "prog", OutputCut: j.cut})
		}
		f.mu.Unlock()
		answer(w, js)
	})
	mux.HandleFunc("GET "+api.PathNodes, func(w http.ResponseWriter, r *http.Request) { answer(w, f.nodes) })
	mux.HandleFunc("GET "+api.PathEvents, func(w http.ResponseWriter, r *http.Request) { answer(w, f.events) })
	return mux
}
