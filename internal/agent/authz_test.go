package agent

// The authorization matrix of the CLI's API: every route apiRoutes
// registers, asked of node n1 by user A (uid 1001), user B (uid 1002) and
// root, about a job of A whose home is n1, the asked node ("here"), and
// one whose home is n2 ("away"). The users of a cluster do not trust each
// other: a user sees and touches only their own jobs, and another user's
// at most as owner, state and node, never its argv, environment, working
// directory, file paths or output; root sees and touches everything;
// loading a policy is root's alone. None of the peer routes answers on the
// socket. TestAuthzMatrix logs the whole matrix with each cell's result;
// TestAuthzMatrixCoversEveryRoute fails when apiRoutes registers a route
// the matrix has no row for.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/observe"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/migrate"
)

// authzCaller is who asks, as SO_PEERCRED names them.
type authzCaller int

const (
	authzA authzCaller = iota
	authzB
	authzRoot
)

var authzCallers = [...]struct {
	name string
	c    Caller
}{
	authzA:    {"A", Caller{UID: 1001, GID: 1001}},
	authzB:    {"B", Caller{UID: 1002, GID: 1002}},
	authzRoot: {"root", Caller{UID: 0, GID: 0}},
}

// authzOrder is the order the callers ask a cell in: B, who is refused
// everything of A's, first, so a refusal is checked before an allowed
// call changes the job (stops it, moves it).
var authzOrder = [...]authzCaller{authzB, authzA, authzRoot}

// authzWant is a cell's expected outcome.
type authzWant string

const (
	// yes: served; the call does what it says, and shows the job in full.
	yes authzWant = "yes"
	// no: refused (403, or "permission denied" for that job) or, for a
	// listing, the job left out or shown as owner, state and node only;
	// nothing is done and nothing private of the job is in the answer.
	no authzWant = "no"
)

// authzRow is one route of the matrix.
type authzRow struct {
	route  string       // the pattern, as apiRoutes registers it
	may    string       // what a caller may do by it
	perJob bool         // asked about each of A's two jobs
	want   [3]authzWant // by caller: A, B, root
	// check asks the route as who (about job j, nil for a route about no
	// job) and says how the outcome differs from want; "" when it does not.
	check func(x *authzEnv, who authzCaller, j *authzJob, want authzWant) string
}

// authzMatrix is every route of the CLI's API, in the order the test asks
// them: those that change a job (stop it, move it) or the cluster (a
// policy) last.
var authzMatrix = []authzRow{
	{"GET " + api.PathNodes, "see the nodes", false, [3]authzWant{yes, yes, yes}, (*authzEnv).checkNodes},
	{"GET " + api.PathStats, "see the agent's counters", false, [3]authzWant{yes, yes, yes}, (*authzEnv).checkStats},
	{"GET /metrics", "see the agent's metrics", false, [3]authzWant{yes, yes, yes}, (*authzEnv).checkMetrics},
	{"GET " + api.PathPolicy, "see the policy", false, [3]authzWant{yes, yes, yes}, (*authzEnv).checkPolicyShow},
	{"GET " + api.PathPS, "see the job (ps)", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkPS},
	{"GET " + api.PathEvents, "see the job's events", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkEvents},
	{"GET " + api.PathJobOutput, "attach: read its output", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkOutput},
	{"POST " + api.PathJobStdin, "attach: write its stdin", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkStdin},
	{"POST " + api.PathKill, "signal it", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkKill},
	{"POST " + api.PathPurge, "remove A's ended jobs (root: any user's)", false, [3]authzWant{yes, no, yes}, (*authzEnv).checkPurge},
	{"GET " + api.PathSweep, "see A's sweep (ps SWEEP)", false, [3]authzWant{yes, no, yes}, (*authzEnv).checkSweep},
	{"POST " + api.PathMigrate, "migrate it", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkMigrate},
	{"POST " + api.PathCheckpoint, "checkpoint it (its memory)", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkCheckpoint},
	{"POST " + api.PathRestart, "restart it from its checkpoint", true, [3]authzWant{yes, no, yes}, (*authzEnv).checkRestart},
	{"POST " + api.PathRun, "run a job as oneself", false, [3]authzWant{yes, yes, yes}, (*authzEnv).checkRun},
	{"POST " + api.PathPolicy, "load a policy (root only)", false, [3]authzWant{no, no, yes}, (*authzEnv).checkPolicyLoad},
	{"POST " + api.PathNodeDrain, "drain a node (root only)", false, [3]authzWant{no, no, yes}, (*authzEnv).checkDrain},
	{"GET /debug/pprof/{name...}", "profile the agent (root only)", false, [3]authzWant{no, no, yes}, (*authzEnv).checkPprof},
}

// authzEnv is a harness cluster of two nodes and A's two jobs.
type authzEnv struct {
	t    *testing.T
	c    *cluster
	jobs [2]*authzJob
	// answers are the bodies of the current cell's answers.
	answers []string
	// sweep is a sweep of A's (checkSweep makes it).
	sweep string
}

// authzJob is one of A's jobs and what only A and root may learn of it.
type authzJob struct {
	place    string // here: its home is n1, the asked node; away: n2
	home     int    // its home's node index
	id       string
	arg      string // a path on its command line
	env      string // a value in its environment
	cwd      string
	openFile string // a path it has open, which a failed migration's event names
	output   string
	stdin    *os.File // the reading end of its stdin, as the job reads it
}

// private is what of job j only its owner and root may see.
func (j *authzJob) private() []string {
	return []string{j.arg, j.env, j.cwd, j.openFile, j.output,
		base64.StdEncoding.EncodeToString([]byte(j.output + "\n"))} // api.Output's bytes, as JSON has them
}

// ask sends a request to node i's API as who: to the handler its unix
// socket serves, with the caller in the request's context where
// startAPI's ConnContext puts what SO_PEERCRED said.
func (x *authzEnv) ask(i int, who authzCaller, method, target, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	req = req.WithContext(httpx.WithCaller(req.Context(), authzCallers[who].c))
	w := httptest.NewRecorder()
	x.c.nodes[i].a.apiSrv.Handler.ServeHTTP(w, req)
	x.answers = append(x.answers, w.Body.String())
	return w.Code, w.Body.Bytes()
}

// served says how an answer differs from want: yes is 200 with a body
// that decodes into out (then effect, when not nil, says what is wrong
// with it), no is 403.
func served(want authzWant, code int, body []byte, out any, effect func() string) string {
	if want == no {
		if code != http.StatusForbidden {
			return fmt.Sprintf("answered %d, want 403: %.200s", code, body)
		}
		return ""
	}
	if code != http.StatusOK {
		return fmt.Sprintf("answered %d, want 200: %.200s", code, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Sprintf("answer does not decode: %v: %.200s", err, body)
		}
	}
	if effect != nil {
		return effect()
	}
	return ""
}

// leaked names what of jobs' private details the current cell's answers
// hold.
func (x *authzEnv) leaked(jobs []*authzJob) string {
	var found []string
	for _, j := range jobs {
		for _, p := range j.private() {
			for _, a := range x.answers {
				if strings.Contains(a, p) {
					found = append(found, fmt.Sprintf("%q of job %s", p, j.id))
					break
				}
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "the answer holds " + strings.Join(found, ", ")
}

func (x *authzEnv) checkNodes(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, api.PathNodes, "")
	var ns []api.NodeInfo
	return served(want, code, b, &ns, func() string {
		if len(ns) != len(x.c.nodes) {
			return fmt.Sprintf("%d nodes listed, want %d", len(ns), len(x.c.nodes))
		}
		return ""
	})
}

func (x *authzEnv) checkStats(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, api.PathStats, "")
	var s api.Stats
	return served(want, code, b, &s, func() string {
		if s.Node != "n1" {
			return fmt.Sprintf("stats of node %q, want n1", s.Node)
		}
		return ""
	})
}

func (x *authzEnv) checkMetrics(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, "/metrics", "")
	return served(want, code, b, nil, func() string {
		if !strings.Contains(string(b), "roam_node_load") {
			return "no roam_node_load in the metrics"
		}
		return ""
	})
}

// checkPprof asks for the agent's goroutines: root gets them, with the
// agent's own functions named; a user gets nothing.
func (x *authzEnv) checkPprof(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, "/debug/pprof/goroutine?debug=1", "")
	if want == no && strings.Contains(string(b), "roam/internal/agent") {
		return "a user got the agent's goroutines"
	}
	return served(want, code, b, nil, func() string {
		if !strings.Contains(string(b), "roam/internal/agent") {
			return "no agent goroutine in the profile"
		}
		return ""
	})
}

func (x *authzEnv) checkPolicyShow(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, api.PathPolicy, "")
	var ps []api.NodePolicy
	return served(want, code, b, &ps, func() string {
		if len(ps) != len(x.c.nodes) {
			return fmt.Sprintf("policies of %d nodes, want %d", len(ps), len(x.c.nodes))
		}
		return ""
	})
}

// checkPS asks `roam ps -a` and, but for root (whose plain ps lists root's
// own jobs), `roam ps`.
func (x *authzEnv) checkPS(who authzCaller, j *authzJob, want authzWant) string {
	targets := []string{api.PathPS + "?all=1"}
	if who != authzRoot {
		targets = append(targets, api.PathPS)
	}
	for _, target := range targets {
		code, b := x.ask(0, who, http.MethodGet, target, "")
		if code != http.StatusOK {
			return fmt.Sprintf("%s answered %d, want 200: %.200s", target, code, b)
		}
		var js []api.Job
		if err := json.Unmarshal(b, &js); err != nil {
			return fmt.Sprintf("%s: %v", target, err)
		}
		var row *api.Job
		for i := range js {
			if js[i].ID == j.id {
				row = &js[i]
			}
		}
		switch {
		case want == yes && row == nil:
			return fmt.Sprintf("%s does not list %s", target, j.id)
		case want == yes && !strings.Contains(row.Cmd, j.arg):
			return fmt.Sprintf("%s lists %s without its command line: %q", target, j.id, row.Cmd)
		case want == no && row != nil && (row.Cmd != "" || row.PinReason != "" || len(row.MigrationLog) > 0):
			return fmt.Sprintf("%s shows %s beyond owner, state and node: cmd %q, pin reason %q, %d migrations",
				target, j.id, row.Cmd, row.PinReason, len(row.MigrationLog))
		}
	}
	return ""
}

// checkEvents asks `roam events`. Anyone may list events; those of
// another user's job without its paths.
func (x *authzEnv) checkEvents(who authzCaller, j *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, api.PathEvents, "")
	if want == no {
		if code != http.StatusOK && code != http.StatusForbidden {
			return fmt.Sprintf("answered %d: %.200s", code, b)
		}
		return "" // what it must not hold is checked for every answer to B
	}
	var es []api.Event
	return served(want, code, b, &es, func() string {
		for _, e := range es {
			if e.Job == j.id && strings.Contains(e.Why, j.openFile) {
				return ""
			}
		}
		return fmt.Sprintf("no event of %s names its open file %s", j.id, j.openFile)
	})
}

func (x *authzEnv) checkOutput(who authzCaller, j *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodGet, api.Fill(api.PathJobOutput, j.id)+"?out=0&err=0", "")
	var o api.Output
	return served(want, code, b, &o, func() string {
		if !strings.Contains(string(o.Stdout), j.output) {
			return fmt.Sprintf("stdout %q, want %q", o.Stdout, j.output)
		}
		return ""
	})
}

func (x *authzEnv) checkStdin(who authzCaller, j *authzJob, want authzWant) string {
	line := "stdin from " + authzCallers[who].name + "\n"
	code, b := x.ask(0, who, http.MethodPost, api.Fill(api.PathJobStdin, j.id), line)
	got := authzDrain(j.stdin)
	if msg := served(want, code, b, nil, nil); msg != "" {
		return msg
	}
	switch {
	case want == yes && got != line:
		return fmt.Sprintf("the job read %q, want %q", got, line)
	case want == no && got != "":
		return fmt.Sprintf("the job read %q", got)
	}
	return ""
}

// authzDrain reads what is in a pipe without waiting.
func authzDrain(r *os.File) string {
	rc, err := r.SyscallConn()
	if err != nil {
		return ""
	}
	buf := make([]byte, 64<<10)
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		n, _ = syscall.Read(int(fd), buf)
		return true // never wait: the pipe is non-blocking
	})
	return string(buf[:max(n, 0)])
}

// checkKill sends SIGSTOP, which shows (the job is frozen, and roam ps
// says stopped) and is undone (SIGCONT, through the job's node's agent) so
// the next caller finds the job as it was.
func (x *authzEnv) checkKill(who authzCaller, j *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodPost, api.PathKill, fmt.Sprintf(`{"ids":[%q],"signal":%d}`, j.id, syscall.SIGSTOP))
	_, frozen := x.c.world.copies(j.id)
	shown := x.psState(j.id)
	for _, n := range frozen {
		_ = x.c.nodes[nodeIndex(n)].a.control.SignalHere(j.id, syscall.SIGCONT)
	}
	if len(frozen) > 0 && shown != api.StateStopped {
		return fmt.Sprintf("roam ps shows the stopped job %s", shown)
	}
	if len(frozen) > 0 && x.psState(j.id) != api.StateRunning {
		return fmt.Sprintf("roam ps shows the continued job %s", x.psState(j.id))
	}
	if want == no {
		var res []api.KillResult
		switch {
		case len(frozen) > 0:
			return fmt.Sprintf("the job was stopped (answer %d: %.200s)", code, b)
		case code == http.StatusForbidden:
			return ""
		case code == http.StatusOK && json.Unmarshal(b, &res) == nil && len(res) == 1 && strings.Contains(res[0].Error, "permission denied"):
			return ""
		}
		return fmt.Sprintf("answered %d, want 403 or permission denied for %s: %.200s", code, j.id, b)
	}
	var res []api.KillResult
	return served(want, code, b, &res, func() string {
		if len(res) != 1 || res[0].Error != "" {
			return fmt.Sprintf("results %+v", res)
		}
		if len(frozen) == 0 {
			return "the job was not stopped"
		}
		return ""
	})
}

// psState is job id's state as roam ps shows it to root.
func (x *authzEnv) psState(id string) string {
	for _, r := range x.c.nodes[0].a.PS(Caller{}, true) {
		if r.ID == id {
			return r.State
		}
	}
	return "absent"
}

// checkMigrate moves the job to the other node.
func (x *authzEnv) checkMigrate(who authzCaller, j *authzJob, want authzWant) string {
	run, _ := x.c.world.copies(j.id)
	if len(run) != 1 {
		return fmt.Sprintf("before: the job runs on %v", run)
	}
	from, to := run[0], "n1"
	if from == "n1" {
		to = "n2"
	}
	code, b := x.ask(0, who, http.MethodPost, api.PathMigrate, fmt.Sprintf(`{"id":%q,"node":%q}`, j.id, to))
	if want == no {
		if now, _ := x.c.world.copies(j.id); len(now) != 1 || now[0] != from {
			return fmt.Sprintf("the job moved from %s to %v", from, now)
		}
		return served(want, code, b, nil, nil)
	}
	var m api.Migration
	return served(want, code, b, &m, func() string {
		if !m.OK {
			return fmt.Sprintf("migration not ok: %+v", m)
		}
		// The home hears of the move just after the answer.
		for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			now, _ := x.c.world.copies(j.id)
			if len(now) == 1 && now[0] == to && x.c.homeRec(j.id).Node == to {
				return ""
			}
			if time.Now().After(end) {
				return fmt.Sprintf("a minute after the migration the job runs on %v, its home says %s; want %s", now, x.c.homeRec(j.id).Node, to)
			}
		}
	})
}

// checkPurge asks to remove user A's ended jobs (B names A's uid): A's
// jobs run, so a purge allowed removes nothing of them either way.
func (x *authzEnv) checkPurge(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodPost, api.PathPurge, `{"uid":1001}`)
	var res api.PurgeResult
	msg := served(want, code, b, &res, func() string {
		if res.Removed != 0 {
			return fmt.Sprintf("removed %d of A's running jobs", res.Removed)
		}
		return ""
	})
	for _, j := range x.jobs {
		if r := x.c.homeRec(j.id); r.ID == "" {
			return fmt.Sprintf("%s is gone after a purge", j.id)
		}
	}
	return msg
}

// checkRun starts a job with a body that claims root's uid: the job is the
// caller's, from SO_PEERCRED, never the body's.
func (x *authzEnv) checkRun(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodPost, api.PathRun, `{"argv":["/bin/true"],"cwd":"/","count":1,"on":"n1","uid":0,"gid":0,"user":"root"}`)
	var resp api.RunResponse
	return served(want, code, b, &resp, func() string {
		if len(resp.IDs) != 1 {
			return fmt.Sprintf("started %v", resp.IDs)
		}
		c := authzCallers[who].c
		if r := x.c.homeRec(resp.IDs[0]); r.UID != c.UID || r.GID != c.GID {
			return fmt.Sprintf("job %s runs as %d:%d, want the caller's %d:%d", r.ID, r.UID, r.GID, c.UID, c.GID)
		}
		return ""
	})
}

// checkPolicyLoad loads a policy that moves nothing, named after the caller.
func (x *authzEnv) checkPolicyLoad(who authzCaller, _ *authzJob, want authzWant) string {
	name := "authz-" + authzCallers[who].name
	text := "name: " + name + "\nplacement: round-robin\n"
	code, b := x.ask(0, who, http.MethodPost, api.PathPolicy, fmt.Sprintf(`{"text":%q}`, text))
	var runs []string
	for _, h := range x.c.nodes {
		if h.a.sched.Policy().Name == name {
			runs = append(runs, h.name)
		}
	}
	if want == no && len(runs) > 0 {
		return fmt.Sprintf("nodes %v run the policy %s", runs, name)
	}
	return served(want, code, b, nil, func() string {
		if len(runs) != len(x.c.nodes) {
			return fmt.Sprintf("only nodes %v run the policy %s", runs, name)
		}
		return ""
	})
}

// checkDrain drains n2 and, when that was done, resumes it at once so
// the next caller finds it as it was.
func (x *authzEnv) checkDrain(who authzCaller, _ *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodPost, api.Fill(api.PathNodeDrain, "n2")+"?state=drain", "")
	n2 := x.c.nodes[1].a
	drained := n2.drain.On()
	if drained {
		if err := n2.drain.Set(peer.DrainOff); err != nil {
			return "resume: " + err.Error()
		}
	}
	if want == no && drained {
		return "n2 is draining"
	}
	return served(want, code, b, nil, func() string {
		if !drained {
			return "n2 is not draining"
		}
		return ""
	})
}

// startJobs starts A's two jobs, through the API as A: "here" from n1 on
// n2, "away" from n2 on n1. Each has written a line of output, which its
// home has; takes stdin (a pipe the test reads, as the fake processes have
// none); and has an event that names an open file.
func (x *authzEnv) startJobs() {
	// A's working directories are A's, where A can reach them: a node
	// looks a job's up as its user (t.TempDir is root's, mode 0700).
	base, err := os.MkdirTemp("/run", "roam-authz-") // not /tmp: a job's is its own
	if err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		x.t.Fatal(err)
	}
	a := authzCallers[authzA]
	for k, place := range []string{"here", "away"} {
		home, on := k, 1-k
		j := &authzJob{place: place, home: home,
			arg:      "/home/roam-authz-usera/" + place + "/input.csv",
			env:      place + "-token-of-usera-5c0ffee",
			cwd:      filepath.Join(base, "usera-"+place+"-cwd"),
			openFile: "/home/roam-authz-usera/" + place + "/draft.tex",
			output:   place + " output of usera",
		}
		if err := os.MkdirAll(j.cwd, 0o700); err != nil {
			x.t.Fatal(err)
		}
		if err := os.Chown(j.cwd, int(a.c.UID), int(a.c.GID)); err != nil {
			x.t.Fatal(err)
		}
		req, _ := json.Marshal(api.RunRequest{Argv: []string{"/bin/true", "--in=" + j.arg}, Env: []string{"USERA_TOKEN=" + j.env},
			Cwd: j.cwd, Count: 1, On: x.c.nodes[on].name, Stdin: true})
		code, b := x.ask(home, authzA, http.MethodPost, api.PathRun, string(req))
		var resp api.RunResponse
		if code != http.StatusOK || json.Unmarshal(b, &resp) != nil || len(resp.IDs) != 1 {
			x.t.Fatalf("A's run from %s: %d %s", x.c.nodes[home].name, code, b)
		}
		j.id = resp.IDs[0]

		x.c.say(on, j.id, j.output)
		x.c.waitFor("A's output at the home of "+j.id, time.Minute, func() bool { return strings.Contains(x.c.homeOutput(j.id), j.output) })

		r, w, err := os.Pipe()
		if err != nil {
			x.t.Fatal(err)
		}
		x.t.Cleanup(func() { r.Close(); w.Close() })
		j.stdin = r
		a := x.c.nodes[on].a
		a.jobs.SetStdin(j.id, w)

		// The event a policy's failed move of the job records
		// (scheduler.Scheduler.Move): the destination's refusal names
		// the open file it does not reach (checkFiles). The fake
		// checkpointer finds no open files, so the event is recorded
		// here as the scheduler records it.
		_, _, ferr := a.in.CheckFiles(&asuser.Cred{UID: 1001, GID: 1001}, []migrate.OpenFile{{Path: j.openFile, Access: "r", Same: true}})
		if ferr == nil {
			x.t.Fatalf("%s exists on this machine", j.openFile)
		}
		a.event(api.Event{Kind: "failed", Job: j.id, UID: a.jobs.Owner(j.id), From: a.cfg.NodeID, To: x.c.nodes[home].name,
			Why: "cpu load 1.80 over 1.00; failed: " + ferr.Error()})
		x.jobs[k] = j
	}
}

// checkPeerRoutesOffSocket asks every peer route on n1's API socket, as
// each caller: none may answer (404).
func (x *authzEnv) checkPeerRoutesOffSocket() []string {
	var lines []string
	for _, p := range authzRegistered(x.t, "peerRoutes") {
		method, path := authzSample(p, x.jobs[0].id)
		line := fmt.Sprintf("%-34s %-28s %-5s", p, "none: not on the socket", "-")
		for _, who := range []authzCaller{authzA, authzB, authzRoot} {
			x.answers = nil
			code, b := x.ask(0, who, method, path+"?id="+x.jobs[0].id, "")
			res := "ok"
			if code != http.StatusNotFound {
				res = "FAIL"
				x.t.Errorf("peer route %s, asked on the API socket by %s: answered %d, want 404: %.200s", p, authzCallers[who].name, code, b)
			}
			line += fmt.Sprintf("  %s:no %-4s", authzCallers[who].name, res)
		}
		lines = append(lines, line)
	}
	return lines
}

// TestAuthzMatrix asks every route of the matrix as each caller, about
// each of A's jobs for a route about a job, and checks the outcome; every
// answer B gets is also checked for anything private of A's jobs.
func TestAuthzMatrix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &authzEnv{t: t, c: newCluster(t, 2, 21, faults{}, "static")}
		x.startJobs()
		var lines []string
		for _, row := range authzMatrix {
			cells := []*authzJob{nil}
			if row.perJob {
				cells = x.jobs[:]
			}
			for _, j := range cells {
				place, secretOf := "-", x.jobs[:]
				if j != nil {
					place, secretOf = j.place, []*authzJob{j}
				}
				var res [3]string
				for _, who := range authzOrder {
					x.answers = nil
					msg := row.check(x, who, j, row.want[who])
					if who == authzB {
						if leak := x.leaked(secretOf); leak != "" {
							msg = strings.TrimPrefix(msg+"; "+leak, "; ")
						}
					}
					res[who] = "ok"
					if msg != "" {
						res[who] = "FAIL"
						t.Errorf("%s (%s), caller %s, job %s: want %s: %s", row.route, row.may, authzCallers[who].name, place, row.want[who], msg)
					}
				}
				line := fmt.Sprintf("%-34s %-28s %-5s", row.route, row.may, place)
				for who := range authzCallers {
					line += fmt.Sprintf("  %s:%-3s %-4s", authzCallers[who].name, row.want[who], res[who])
				}
				lines = append(lines, line)
			}
		}
		lines = append(lines, x.checkPeerRoutesOffSocket()...)
		t.Logf("authorization matrix (n1 asked; job here: home n1, away: home n2; yes: served in full, no: refused or hidden):\n%s", strings.Join(lines, "\n"))
	})
}

// TestAuthzMatrixCoversEveryRoute fails when apiRoutes registers a route
// the matrix has no row for, or the matrix has a row for a route apiRoutes
// does not register. The patterns are read from apiRoutes' source and
// checked against a mux apiRoutes fills.
func TestAuthzMatrixCoversEveryRoute(t *testing.T) {
	registered := authzRegistered(t, "apiRoutes")
	mux := http.NewServeMux()
	(&Agent{}).apiRoutes(mux)
	for _, p := range registered {
		method, path := authzSample(p, "n1.1")
		if _, got := mux.Handler(httptest.NewRequest(method, path, nil)); got != p {
			t.Errorf("apiRoutes' source registers %q, but its mux routes %s %s to %q", p, method, path, got)
		}
	}
	var inMatrix []string
	for _, row := range authzMatrix {
		inMatrix = append(inMatrix, row.route)
		if !slices.Contains(registered, row.route) {
			t.Errorf("the matrix has a row for %s, which apiRoutes does not register", row.route)
		}
	}
	for _, p := range registered {
		if !slices.Contains(inMatrix, p) {
			t.Errorf("apiRoutes registers %s, which the authorization matrix (authz_test.go) does not cover: add a row saying who may use it", p)
		}
	}
	t.Logf("apiRoutes registers %d routes: %s", len(registered), strings.Join(registered, ", "))
}

// authzRegistered reads the patterns the method fn of *Agent registers on
// its mux from the package's source. It fails when fn does anything with
// its mux other than Handle or HandleFunc with a literal pattern (a route
// registered elsewhere would escape the matrix).
func authzRegistered(t *testing.T, fn string) []string {
	t.Helper()
	fset := token.NewFileSet()
	peerPaths := authzPeerPaths(t, fset)
	funcs := authzFuncs(t, fset, "*.go", nil)
	if fd := funcs[fn]; fd == nil || fd.Recv == nil {
		t.Fatalf("no method %s in the package's source", fn)
	}
	return authzFollow(t, fset, funcs, fn, peerPaths)
}

// authzFuncs parses the files glob names, test files aside, and returns
// their functions and methods by name. With consts, it adds to it the
// files' string constants that authzPattern can read, by their bare
// names.
func authzFuncs(t *testing.T, fset *token.FileSet, glob string, consts map[string]string) map[string]*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				funcs[d.Name.Name] = d
			case *ast.GenDecl:
				if consts == nil || d.Tok != token.CONST {
					break
				}
				for _, sp := range d.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if p, ok := authzPattern(vs.Values[i], consts); ok {
								consts[name.Name] = p
							}
						}
					}
				}
			}
		}
	}
	return funcs
}

// authzFollow reads the routes function fn registers on its mux (its
// parameter of type *http.ServeMux), and those of the functions it
// passes its mux to.
func authzFollow(t *testing.T, fset *token.FileSet, funcs map[string]*ast.FuncDecl, fn string, peerPaths map[string]string) []string {
	t.Helper()
	fd := funcs[fn]
	mux := ""
	for _, p := range fd.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok && len(p.Names) == 1 {
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "ServeMux" {
				mux = p.Names[0].Name
			}
		}
	}
	if mux == "" {
		t.Fatalf("%s: %s takes no *http.ServeMux", fset.Position(fd.Pos()), fn)
	}
	var patterns []string
	uses, registers := 0, 0
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if n.Name == mux {
				uses++
			}
		case *ast.CallExpr:
			if callee := authzCallee(n, mux); callee != "" && funcs[callee] != nil {
				patterns = append(patterns, authzFollow(t, fset, funcs, callee, peerPaths)...)
				registers++ // the mux passed on: its routes are followed
				break
			}
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != mux || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				break
			}
			p, ok := authzPattern(n.Args[0], peerPaths)
			if !ok {
				t.Fatalf("%s: a pattern that is neither a literal nor a literal method and a path of package peer: the matrix cannot read it", fset.Position(n.Pos()))
			}
			patterns = append(patterns, p)
			registers++
		}
		return true
	})
	if uses != registers {
		t.Fatalf("%s: %s uses its mux %d times, %d of them to register a route or pass it on: routes it has registered elsewhere would escape the matrix; teach authzRegistered to follow them",
			fset.Position(fd.Pos()), fn, uses, registers)
	}
	return patterns
}

// authzCallee is the name of the function (or method) call n passes the
// mux to as its last argument, "" when it does not.
func authzCallee(n *ast.CallExpr, mux string) string {
	if len(n.Args) == 0 {
		return ""
	}
	if id, ok := n.Args[len(n.Args)-1].(*ast.Ident); !ok || id.Name != mux {
		return ""
	}
	switch f := n.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// authzPeerPaths reads the path constants of package peer (routes.go)
// and of package api (routes.go), by qualified name (peer.Ping,
// api.Nodes).
func authzPeerPaths(t *testing.T, fset *token.FileSet) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for pkg, file := range map[string]string{"peer": filepath.Join("peer", "routes.go"), "api": filepath.Join("..", "api", "routes.go")} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						paths[pkg+"."+name.Name], _ = strconv.Unquote(lit.Value)
						n++
					}
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no path constants", file)
		}
	}
	return paths
}

// authzPattern reads a route's pattern: a string literal, or a literal
// (the method and a space) followed by a path constant of package peer
// or api, or a constant of the package read whose value it has read
// before (authzFuncs with consts).
func authzPattern(e ast.Expr, peerPaths map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		p, ok := peerPaths[e.Name]
		return p, ok
	case *ast.BasicLit:
		if p, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
			return p, true
		}
	case *ast.BinaryExpr:
		sel, ok := e.Y.(*ast.SelectorExpr)
		if !ok || e.Op != token.ADD {
			return "", false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || (pkg.Name != "peer" && pkg.Name != "api") {
			return "", false
		}
		head, ok := authzPattern(e.X, peerPaths)
		path, known := peerPaths[pkg.Name+"."+sel.Sel.Name]
		return head + path, ok && known
	}
	return "", false
}

// authzSample is a request a route's pattern matches: its method (GET for
// a pattern without one) and its path with every wildcard set to id.
func authzSample(pattern, id string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	segs := strings.Split(strings.TrimSpace(path), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = id
		}
	}
	return method, strings.Join(segs, "/")
}

// checkCheckpoint asks for a checkpoint of the job: served, it is a
// checkpoint file and the job runs on, once; refused, it runs on too.
func (x *authzEnv) checkCheckpoint(who authzCaller, j *authzJob, want authzWant) string {
	code, b := x.ask(0, who, http.MethodPost, api.PathCheckpoint, fmt.Sprintf(`{"id":%q}`, j.id))
	if run, _ := x.c.world.copies(j.id); len(run) != 1 {
		return fmt.Sprintf("after the checkpoint the job runs on %v", run)
	}
	if want == no {
		return served(want, code, b, nil, nil)
	}
	return served(want, code, b, nil, func() string {
		if !bytes.HasPrefix(b, fmt.Appendf(nil, "%s %d\n", migrate.CheckpointMagic, migrate.CheckpointVersion)) {
			return fmt.Sprintf("the answer is not a checkpoint file: %.60q", b)
		}
		return ""
	})
}

// checkRestart restarts the job from a checkpoint root took: served (the
// job killed first by its owner: one root killed is not restarted), it
// runs again once, as its next incarnation; refused
// (the job running, so only the caller is in question), nothing changes.
func (x *authzEnv) checkRestart(who authzCaller, j *authzJob, want authzWant) string {
	code, ck := x.ask(0, authzRoot, http.MethodPost, api.PathCheckpoint, fmt.Sprintf(`{"id":%q}`, j.id))
	if code != http.StatusOK {
		return fmt.Sprintf("root's checkpoint answered %d: %.200s", code, ck)
	}
	x.answers = x.answers[:len(x.answers)-1] // root's, not the caller's
	inc := x.c.homeRec(j.id).Inc
	if want == no {
		code, b := x.ask(0, who, http.MethodPost, api.PathRestart, string(ck))
		if run, _ := x.c.world.copies(j.id); len(run) != 1 || x.c.homeRec(j.id).Inc != inc {
			return fmt.Sprintf("after a refused restart the job runs on %v, incarnation %d (was %d)", run, x.c.homeRec(j.id).Inc, inc)
		}
		return served(want, code, b, nil, nil)
	}
	if c, b := x.ask(0, authzA, http.MethodPost, api.PathKill, fmt.Sprintf(`{"ids":[%q],"signal":9}`, j.id)); c != http.StatusOK {
		return fmt.Sprintf("kill answered %d: %.200s", c, b)
	}
	x.answers = x.answers[:len(x.answers)-1]
	x.c.waitFor(j.id+" ended", time.Minute, func() bool { return x.c.homeRec(j.id).State == api.StateFinished })
	code, b := x.ask(0, who, http.MethodPost, api.PathRestart, string(ck))
	var res api.RestartResponse
	return served(want, code, b, &res, func() string {
		if res.ID != j.id || res.Inc != inc+1 {
			return fmt.Sprintf("restarted as %+v, want %s incarnation %d", res, j.id, inc+1)
		}
		for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			run, _ := x.c.world.copies(j.id)
			if rec := x.c.homeRec(j.id); len(run) == 1 && rec.State == api.StateRunning && rec.Inc == inc+1 {
				return ""
			}
			if time.Now().After(end) {
				return fmt.Sprintf("a minute after the restart the job runs on %v, its record %s", run, x.c.homeRec(j.id).State)
			}
		}
	})
}

// Every path of package peer is a route the peer port serves, and every
// peer route is registered with one of them; so for package api's paths
// and the socket's routes: a path named in one place only (a caller's
// literal, or a constant nothing serves) is a call that cannot be
// answered.
func TestPathsAreTheRoutes(t *testing.T) {
	all := authzPeerPaths(t, token.NewFileSet())
	for fn, pkg := range map[string]string{"peerRoutes": "peer", "apiRoutes": "api"} {
		paths := map[string]string{}
		for name, path := range all {
			if p, n, _ := strings.Cut(name, "."); p == pkg && n != "Prefix" {
				paths[name] = path
			}
		}
		served := map[string]bool{}
		if fn == "apiRoutes" {
			// roamd adds the web view's token route through Parts.Routes
			// (cmd/roamd/wire.go).
			_, path, _ := strings.Cut(observe.TokenRoute, " ")
			served[path] = true
		}
		for _, p := range authzRegistered(t, fn) {
			_, path, _ := strings.Cut(p, " ")
			if !slices.Contains(slices.Collect(maps.Values(paths)), path) {
				t.Errorf("%s registers %s, which is not a path of package %s (%s/routes.go)", fn, p, pkg, pkg)
			}
			served[path] = true
		}
		for name, path := range paths {
			if !served[path] {
				t.Errorf("%s (%s) is served by no route of %s", name, path, fn)
			}
		}
	}
}

// roamd's own routes of the socket (Parts.Routes: the web view's token,
// observe.Server.SocketRoutes) are outside the authorization matrix,
// which reads apiRoutes. What the agent owes them is the caller as the
// socket said (SO_PEERCRED): each caller its own uid, and no uid for a
// request the socket did not vouch for. The token route then mints for
// that uid alone (package observe's TestStreamByScope).
func TestSocketRoutesGetTheSocketsCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		routes := func(mux *http.ServeMux, uid func(*http.Request) (uint32, bool)) {
			mux.HandleFunc("POST "+api.PathWebToken, func(w http.ResponseWriter, r *http.Request) {
				u, ok := uid(r)
				if !ok {
					http.Error(w, "the caller is not known", http.StatusForbidden)
					return
				}
				fmt.Fprint(w, u)
			})
		}
		x := &authzEnv{t: t, c: newClusterOf(t, 1, 22, faults{}, "static", parts{routes: routes})}
		for _, who := range authzOrder {
			code, b := x.ask(0, who, http.MethodPost, api.PathWebToken, "")
			if want := strconv.Itoa(int(authzCallers[who].c.UID)); code != http.StatusOK || string(b) != want {
				t.Errorf("%s asked roamd's token route: %d %q; want 200 and its own uid %s", authzCallers[who].name, code, b, want)
			}
		}
		w := httptest.NewRecorder()
		x.c.nodes[0].a.apiSrv.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, api.PathWebToken, nil))
		if w.Code == http.StatusOK {
			t.Errorf("a request with no caller from the socket: %d %q; want it refused", w.Code, w.Body.String())
		}
	})
}
