package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cli"
	"roam/internal/emu"
)

// jsRecord is a line of a job stream with --json (roam run, attach,
// restart, logs), as a script reads it.
type jsRecord struct {
	Job      string    `json:"job"`
	Kind     string    `json:"kind"`
	Node     string    `json:"node"`
	Text     *string   `json:"text"`
	Bytes    []byte    `json:"bytes"`
	Partial  bool      `json:"partial"`
	ExitCode *int      `json:"exit_code"`
	At       time.Time `json:"at"`
	Why      string    `json:"why"`
	Sweep    string    `json:"sweep"`
	Summary  string    `json:"summary"`
}

// jsonCase runs roam commands with --json on a real cluster and checks
// that what they print parses, as one value or one object a line.
type jsonCase struct {
	t  *testing.T
	c  *cluster
	ui uint32 // the user most commands run as
	// ran are the command paths run, with their form.
	ran map[string]string
	// forms are every command's JSON form (cli.JSONCommands).
	forms map[string]string
}

// roam runs roam --node 1 --json ARGS as uid (and its gid), from the
// tests' shared directory, and returns its standard output and status.
func (x *jsonCase) roam(uid uint32, args ...string) (string, int) {
	x.t.Helper()
	cmd := x.c.roamCmd(append([]string{"--node", "1", "--json"}, args...)...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := exitCodeOf(err)
	if code < 0 {
		x.t.Fatalf("roam %s: %v", strings.Join(args, " "), err)
	}
	x.mark(args)
	if strings.Count(errOut.String(), "\n") > 1 && args[0] != "node" { // node drain --wait says its progress
		x.t.Errorf("roam --json %s: more than one line on standard error: %q", strings.Join(args, " "), errOut.String())
	}
	return out.String(), code
}

// mark notes the command path args run.
func (x *jsonCase) mark(args []string) {
	path := "roam"
	for _, a := range args {
		if _, ok := x.forms[path+" "+a]; ok || x.isGroup(path+" "+a) {
			path += " " + a
		}
	}
	form, ok := x.forms[path]
	if !ok {
		x.t.Fatalf("roam %s: command %q has no JSON form", strings.Join(args, " "), path)
	}
	x.ran[path] = form
}

func (x *jsonCase) isGroup(p string) bool {
	for f := range x.forms {
		if strings.HasPrefix(f, p+" ") {
			return true
		}
	}
	return false
}

// must is roam, failing the test unless it exits want.
func (x *jsonCase) must(uid uint32, want int, args ...string) string {
	x.t.Helper()
	out, code := x.roam(uid, args...)
	if code != want {
		x.t.Fatalf("roam --json %s: exit %d, want %d; stdout %q", strings.Join(args, " "), code, want, out)
	}
	return out
}

// value parses out as exactly one JSON value into v, refusing a field v
// does not have.
func value(t *testing.T, what, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: not one JSON value of its shape: %v\n%s", what, err, out)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("%s: more than one JSON value:\n%s", what, out)
	}
}

// stream parses out as NDJSON, one object a line, each into a new T.
func stream[T any](t *testing.T, what, out string) []T {
	t.Helper()
	var rs []T
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || dec.More() {
			t.Fatalf("%s: line %d is not one JSON object: %q (%v)", what, n, sc.Text(), err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		t.Fatalf("%s: no line", what)
	}
	return rs
}

// Every roam command with a JSON form (cli.JSONCommands) is run with
// --json against real agents, and what it prints parses as its form
// says: one value of its type, or one object a line (run of a sweep,
// logs -f, attach, events -f, restart); the exit statuses are the table's
// (roam run: its jobs' first non-zero status). Jobs run as uid 70001, but
// the one migrated and checkpointed where this host's root lacks
// CAP_SYS_RESOURCE (there only root's jobs move: roam stats says which).
// The benchmarks are named and not run: each brings up clusters of its
// own on its own subnets and takes minutes.
func TestEveryCommandPrintsJSON(t *testing.T) {
	c := upCluster(t, "e2ejs", 50, "--nodes", "3")
	c.waitAllAlive(3)
	x := &jsonCase{t: t, c: c, ui: 70001, ran: map[string]string{}, forms: map[string]string{}}
	for _, l := range cli.JSONCommands() {
		path, form, _ := strings.Cut(l, "\t")
		x.forms[path] = form
	}
	notRun := map[string]string{}
	for p := range x.forms {
		if strings.HasPrefix(p, "roam bench ") && p != "roam bench list" {
			notRun[p] = "a benchmark brings up clusters of its own, on subnets of its own, for minutes"
		}
	}
	u := x.ui
	dir := filepath.Join(e2eRoot, "tmp", "e2ejs")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	t.Cleanup(func() { os.RemoveAll(dir) })

	// The nodes, the counters, a secret.
	var nodes []api.NodeInfo
	value(t, "nodes", x.must(u, 0, "nodes"), &nodes)
	if len(nodes) != 3 || len(alive(nodes)) != 3 {
		t.Fatalf("nodes --json: %+v", nodes)
	}
	var web api.WebToken
	value(t, "web", x.must(u, 0, "web"), &web)
	if !strings.Contains(web.URL, "/#token=") || !web.Expires.After(time.Now()) {
		t.Fatalf("web --json: %+v", web)
	}
	var stats api.Stats
	value(t, "stats", x.must(u, 0, "stats"), &stats)
	if stats.Node != "1" {
		t.Fatalf("stats --json of node %q", stats.Node)
	}
	var secret struct {
		Secret string `json:"secret"`
		File   string `json:"file"`
	}
	value(t, "keygen", x.must(u, 0, "keygen"), &secret)
	if secret.Secret == "" || secret.File != "" {
		t.Fatalf("keygen --json: %+v", secret)
	}
	keyFile := filepath.Join(dir, "secret")
	value(t, "keygen --out", x.must(u, 0, "keygen", "--out", keyFile), &secret)
	if fi, err := os.Stat(keyFile); err != nil || secret.File != keyFile || fi.Size() == 0 {
		t.Fatalf("keygen --json --out: %+v, %v", secret, err)
	}

	// A sweep of three: each job says its id, index and count from the
	// environment roam gives it, and exits with its index.
	script := `echo "$ROAM_JOB $ROAM_INDEX $ROAM_COUNT"; echo warn >&2; exit $ROAM_INDEX`
	out := x.must(u, 1, "run", "-n", "3", "--", "sh", "-c", script)
	var ids []string
	byJob := map[string][]jsRecord{}
	rs := stream[jsRecord](t, "run -n 3", out)
	if last := rs[len(rs)-1]; last.Kind != "summary" || last.Sweep != rs[0].Sweep || last.Sweep == "" || !strings.HasPrefix(last.Summary, "3 jobs: 1 ok, 2 failed") {
		t.Fatalf("run -n 3 --json: last record %+v, want its sweep %s's summary", last, rs[0].Sweep)
	}
	for i, r := range rs {
		if r.Kind == "started" {
			if i != len(ids) || r.Node == "" {
				t.Fatalf("run --json: start record %d: %+v", i, r)
			}
			ids = append(ids, r.Job)
		}
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	if len(ids) != 3 {
		t.Fatalf("run -n 3 --json started %v", ids)
	}
	for i, id := range ids {
		var stdout, stderr []string
		var exit *int
		for _, r := range byJob[id] {
			switch r.Kind {
			case "stdout", "stderr":
				if r.Text == nil || r.Partial {
					t.Fatalf("%s: output record %+v", id, r)
				}
				if r.Kind == "stdout" {
					stdout = append(stdout, *r.Text)
				} else {
					stderr = append(stderr, *r.Text)
				}
			case "exit":
				exit = r.ExitCode
			}
		}
		want := fmt.Sprintf("%s %d 3", id, i)
		if len(stdout) != 1 || stdout[0] != want || len(stderr) != 1 || stderr[0] != "warn" || exit == nil || *exit != i || byJob[id][len(byJob[id])-1].Kind != "exit" {
			t.Errorf("job %s (index %d): stdout %q, stderr %q, exit %v; want %q, warn, %d, the exit last", id, i, stdout, stderr, exit, want, i)
		}
	}
	// Its output again: logs, logs -f (which exits 0 for a job's 1) and
	// attach (which exits with the job's 2).
	for _, tc := range []struct {
		args []string
		code int
		exit int // -1: no exit record
	}{
		{[]string{"logs", ids[0]}, 0, -1},
		{[]string{"logs", "-f", ids[1]}, 0, 1},
		{[]string{"attach", ids[2]}, 2, 2},
	} {
		rs := stream[jsRecord](t, strings.Join(tc.args, " "), x.must(u, tc.code, tc.args...))
		last := rs[len(rs)-1]
		if tc.exit < 0 && last.Kind == "exit" || tc.exit >= 0 && (last.Kind != "exit" || *last.ExitCode != tc.exit) {
			t.Errorf("roam --json %s: last record %+v", strings.Join(tc.args, " "), last)
		}
		if rs[0].Kind != "stdout" && rs[0].Kind != "stderr" {
			t.Errorf("roam --json %s: first record %+v, want output", strings.Join(tc.args, " "), rs[0])
		}
	}

	// A job left running, listed, signalled.
	rs = stream[jsRecord](t, "run -d", x.must(u, 0, "run", "-d", "--on", "2", "--", "sleep", "600"))
	if len(rs) != 1 || rs[0].Kind != "started" || rs[0].Node != "2" {
		t.Fatalf("run -d --json: %+v", rs)
	}
	sleeper := rs[0].Job
	var js []api.Job
	value(t, "ps", x.must(u, 0, "ps"), &js)
	if len(js) != 4 {
		t.Errorf("ps --json: %d jobs, want 4", len(js))
	}
	value(t, "ps ID", x.must(u, 0, "ps", sleeper), &js)
	if len(js) != 1 || js[0].ID != sleeper || js[0].State != api.StateRunning || js[0].UID != u {
		t.Fatalf("ps --json %s: %+v", sleeper, js)
	}
	var kills []api.KillResult
	value(t, "kill", x.must(u, 0, "kill", "-s", "CONT", sleeper), &kills)
	if len(kills) != 1 || kills[0].ID != sleeper || kills[0].Error != "" {
		t.Fatalf("kill --json: %+v", kills)
	}
	value(t, "kill 9.9", x.must(u, 1, "kill", "-s", "CONT", sleeper, "9.9"), &kills)
	if len(kills) != 2 || kills[0].Error != "" || kills[1].Error == "" {
		t.Fatalf("kill --json of a job that is not: %+v", kills)
	}

	// Events: so far, then followed (a stream that does not end: its
	// first line is read, and it is stopped).
	placed := false
	for _, ev := range stream[api.Event](t, "events", x.must(u, 0, "events")) {
		placed = placed || ev.Kind == "place" && ev.Job == ids[0]
	}
	if !placed {
		t.Errorf("events --json: no placement of %s", ids[0])
	}
	follow := c.roamCmd("--node", "1", "--json", "events", "-f")
	follow.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u, Gid: u}}
	pipe, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	follow.Process.Kill()
	follow.Wait()
	x.mark([]string{"events", "-f"})
	stream[api.Event](t, "events -f", line)
	if err != nil {
		t.Fatalf("events -f --json: %v", err)
	}

	// Migrate, checkpoint and restart a job of a user whose jobs move on
	// this host.
	owner := u
	if !strings.Contains(stats.Migration, "jobs of every user migrate") {
		owner = 0
	}
	rs = stream[jsRecord](t, "run -d", x.must(owner, 0, "run", "-d", "--on", "1", "--", "sleep", "600"))
	moved := rs[0].Job
	var m struct {
		ID   string `json:"id"`
		Node string `json:"node"`
		api.Migration
	}
	value(t, "migrate", x.must(owner, 0, "migrate", moved, "2"), &m)
	if m.ID != moved || m.Node != "2" || m.From != "1" || m.To != "2" || !m.OK || m.FreezeMS <= 0 {
		t.Fatalf("migrate --json: %+v", m)
	}
	value(t, "migrate auto", x.must(owner, 0, "migrate", moved, "auto"), &m)
	if m.ID != moved || m.Node != "auto" {
		t.Fatalf("migrate --json auto: %+v", m)
	}
	ckFile := filepath.Join(dir, "moved.roamckpt")
	var ck struct {
		ID      string `json:"id"`
		File    string `json:"file"`
		Bytes   int64  `json:"bytes"`
		Stopped bool   `json:"stopped"`
	}
	value(t, "checkpoint", x.must(owner, 0, "checkpoint", moved, "-o", ckFile, "--stop"), &ck)
	if fi, err := os.Stat(ckFile); err != nil || ck.ID != moved || ck.File != ckFile || ck.Bytes != fi.Size() || !ck.Stopped {
		t.Fatalf("checkpoint --json: %+v (%v)", ck, err)
	}
	c.waitFinished(moved, 30*time.Second)
	rs = stream[jsRecord](t, "restart -d", x.must(owner, 0, "restart", "-d", "--on", "3", ckFile))
	if len(rs) != 1 || rs[0].Job != moved || rs[0].Kind != "started" || rs[0].Node != "3" {
		t.Fatalf("restart -d --json: %+v", rs)
	}
	x.must(owner, 0, "kill", "-s", "KILL", moved, sleeper)
	c.waitFinished(sleeper, 30*time.Second)
	c.waitFinished(moved, 30*time.Second)

	// Purge the user's ended jobs.
	var purged api.PurgeResult
	value(t, "purge", x.must(u, 0, "purge"), &purged)
	if want := map[bool]int{true: 5, false: 4}[owner == u]; purged.Removed != want {
		t.Errorf("purge --json: removed %d, want the user's %d", purged.Removed, want)
	}

	// The policy.
	var pols []api.NodePolicy
	value(t, "policy show", x.must(u, 0, "policy", "show"), &pols)
	if len(pols) != 3 {
		t.Errorf("policy show --json: %+v", pols)
	}
	value(t, "policy load", x.must(0, 0, "policy", "load", "balance"), &pols)
	if len(pols) != 3 || pols[0].Name != "balance" {
		t.Errorf("policy load --json: %+v", pols)
	}

	// Nodes drained, resumed, removed; the emulated cluster's commands.
	var nr struct {
		Node   string    `json:"node"`
		State  string    `json:"state"`
		Pinned []api.Job `json:"pinned"`
	}
	for _, tc := range []struct {
		args  []string
		state string
	}{
		{[]string{"node", "drain", "3"}, "draining"},
		{[]string{"node", "drain", "--wait", "3"}, "drained"},
		{[]string{"node", "resume", "3"}, "resumed"},
		{[]string{"node", "remove", "3"}, "left"},
	} {
		value(t, strings.Join(tc.args, " "), x.must(0, 0, tc.args...), &nr)
		if nr.Node != "3" || nr.State != tc.state {
			t.Errorf("roam --json %s: %+v, want state %s", strings.Join(tc.args, " "), nr, tc.state)
		}
	}
	var cn struct {
		ID       string  `json:"id"`
		Addr     string  `json:"addr"`
		Capacity float64 `json:"capacity"`
		MemMB    int     `json:"mem_mb"`
		PID      int     `json:"pid"`
		State    string  `json:"state"`
	}
	waitFor(t, 20*time.Second, "node 3's agent gone", func() (bool, string) {
		st, err := emu.Status(c.name)
		return err == nil && st.Nodes[2].State == "down", fmt.Sprint(err)
	})
	value(t, "cluster start", x.must(0, 0, "cluster", "start", "3"), &cn)
	if cn.ID != "3" || cn.PID <= 0 || cn.State != "up" {
		t.Errorf("cluster start --json: %+v", cn)
	}
	value(t, "cluster add", x.must(0, 0, "cluster", "add"), &cn)
	if cn.ID != "4" || cn.PID <= 0 || cn.Addr != "198.18.50.4" {
		t.Errorf("cluster add --json: %+v", cn)
	}
	var link map[string]string
	value(t, "cluster link", x.must(0, 0, "cluster", "link", "4", "down"), &link)
	if link["node"] != "4" || link["link"] != "down" {
		t.Errorf("cluster link --json: %v", link)
	}
	value(t, "cluster link", x.must(0, 0, "cluster", "link", "4", "up"), &link)
	var cs struct {
		Name   string `json:"name"`
		Subnet string `json:"subnet"`
		Status string `json:"status"`
		Nodes  []any  `json:"nodes"`
	}
	value(t, "cluster status", x.must(0, 0, "cluster", "status"), &cs)
	if cs.Name != c.name || cs.Subnet != "198.18.50.0/24" || len(cs.Nodes) != 4 {
		t.Errorf("cluster status --json: %+v", cs)
	}
	// A second cluster, up and down.
	second := &cluster{t: t, name: "e2ejs2"}
	t.Cleanup(func() { second.run("cluster", "down") })
	x2 := &jsonCase{t: t, c: second, ran: x.ran, forms: x.forms}
	value(t, "cluster up", x2.must(0, 0, "cluster", "up", "--nodes", "1", "--subnet", "198.18.51.0/24"), &cs)
	if cs.Name != "e2ejs2" || cs.Status != "up" || len(cs.Nodes) != 1 {
		t.Errorf("cluster up --json: %+v", cs)
	}
	var down map[string]string
	value(t, "cluster down", x2.must(0, 0, "cluster", "down"), &down)
	if down["cluster"] != "e2ejs2" || down["status"] != "down" {
		t.Errorf("cluster down --json: %v", down)
	}
	if left := emu.Leftovers("e2ejs2"); len(left) > 0 {
		t.Errorf("cluster down left %v", left)
	}

	// The benchmarks' list.
	var exps []map[string]string
	value(t, "bench list", x.must(u, 0, "bench", "list"), &exps)
	if len(exps) < 8 || exps[0]["name"] == "" {
		t.Errorf("bench list --json: %v", exps)
	}

	// A small simulation: its cost, the results files in the directory.
	simDir, err := os.MkdirTemp("", "sim-") // in the tests' TMPDIR, which every user reaches
	if err != nil || os.Chown(simDir, int(u), int(u)) != nil {
		t.Fatalf("a directory for roam sim: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(simDir) })
	var cost map[string]float64
	value(t, "sim", x.must(u, 0, "sim", "--nodes", "20", "--time", "30s", "--out", simDir), &cost)
	if cost["nodes"] != 20 || cost["simulated_seconds"] != 30 || cost["events"] <= 0 {
		t.Errorf("sim --json: %v", cost)
	}

	// Seed 000's fan-out under both policies: a point a node count, a
	// run a seed and policy.
	var pts []struct {
		Nodes      int               `json:"nodes"`
		Jobs       string            `json:"jobs"`
		Fifo       []json.RawMessage `json:"fifo"`
		Beneficial []json.RawMessage `json:"beneficial"`
	}
	value(t, "sim lvm", x.must(u, 0, "sim", "lvm", "--nodes", "16", "--jobs", "8", "--seeds", "2", "--out", filepath.Join(simDir, "lvm")), &pts)
	if len(pts) != 1 || pts[0].Nodes != 16 || pts[0].Jobs != "8" || len(pts[0].Fifo) != 2 || len(pts[0].Beneficial) != 2 {
		t.Errorf("sim lvm --json: %+v", pts)
	}

	for path, form := range x.forms {
		if _, ok := x.ran[path]; !ok && notRun[path] == "" {
			t.Errorf("%s has a JSON form (%s) this test does not run: add it", path, form)
		}
	}
	t.Logf("ran %d commands with --json; not run: %d benchmarks", len(x.ran), len(notRun))
}

// roam run's exit statuses, as its help's table says them, on real
// agents and real processes (TestExitStatusTable, internal/cli, provokes
// every row against a fake agent): the first non-zero status in job
// order, not in time; 128+S for a death by signal; 254 for a job lost
// with its node, shown as a lost record with --json; 255 for roam's own
// failures, with one line on standard error and nothing on standard
// output; a job's own 254 passed through without a word. Jobs run as uid
// 70001.
func TestRunExitStatusesOnRealAgents(t *testing.T) {
	c := upCluster(t, "e2ejs3", 52, "--nodes", "3", "--scheduler", "static")
	c.waitAllAlive(3)
	const u = 70001
	runAs := func(args ...string) (string, string, int) {
		cmd := c.as(u, u, append([]string{"--node", "1"}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		code := exitCodeOf(cmd.Run())
		return out.String(), errOut.String(), code
	}
	for _, tc := range []struct {
		what   string
		args   []string
		code   int
		stderr string // a part of the one line on standard error; "" for none
	}{
		{"every job exited 0, and the sweep's summary", []string{"run", "-n", "2", "--", "true"}, 0, ": 2 jobs: 2 ok, 0 failed, 0 lost"},
		{"the first non-zero in job order, though it ends last", []string{"run", "-n", "3", "--", "sh", "-c", "sleep $((2 - ROAM_INDEX)); exit $((ROAM_INDEX + 3))"}, 3,
			": 3 jobs: 0 ok, 3 failed (exit 3: 0; exit 4: 1; exit 5: 2), 0 lost (roam run --rerun"},
		{"a death by SIGTERM", []string{"run", "--", "sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM), ""},
		{"a job's own 254", []string{"run", "--", "sh", "-c", "exit 254"}, 254, ""},
		{"a node that is not", []string{"run", "--on", "9", "--", "true"}, 255, "9"},
		{"-n 0", []string{"run", "-n", "0", "--", "true"}, 255, "-n: 0 is out of range"},
		{"no agent", []string{"--socket", filepath.Join(e2eRoot, "none.sock"), "run", "--", "true"}, 255, "no roam agent"},
	} {
		out, errOut, code := runAs(tc.args...)
		switch {
		case code != tc.code:
			t.Errorf("%s: roam %s exited %d, want %d (stderr %q)", tc.what, strings.Join(tc.args, " "), code, tc.code, errOut)
		case tc.stderr == "" && errOut != "":
			t.Errorf("%s: stderr %q, want nothing", tc.what, errOut)
		case tc.stderr != "" && (!strings.Contains(errOut, tc.stderr) || strings.Count(errOut, "\n") != 1 || out != ""):
			t.Errorf("%s: stdout %q, stderr %q; want nothing, and one line with %q", tc.what, out, errOut, tc.stderr)
		}
	}

	// A job lost with its node: its attached roam run --json prints a
	// lost record and exits 254.
	run := c.as(u, u, "--node", "1", "--json", "run", "--pin", "--on", "3", "--", "sh", "-c", "echo up; sleep 120")
	var errOut bytes.Buffer
	run.Stderr = &errOut
	pipe, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(pipe)
	var started jsRecord
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("run --json ended before its job said up: %v; stderr %q", err, errOut.String())
		}
		var r jsRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("run --json: %q: %v", line, err)
		}
		if r.Kind == "started" {
			started = r
		}
		if r.Kind == "stdout" && r.Text != nil && *r.Text == "up" {
			break
		}
	}
	c.mustRun("cluster", "link", "3", "down")
	rest, _ := io.ReadAll(rd)
	code := exitCodeOf(run.Wait())
	c.mustRun("cluster", "link", "3", "up")
	rs := stream[jsRecord](t, "run --json after the cut", string(rest))
	last := rs[len(rs)-1]
	if code != 254 || last.Kind != "lost" || last.Job != started.Job || last.Node != "3" || last.At.IsZero() ||
		!strings.Contains(errOut.String(), started.Job+" lost: node 3") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("a job lost with its node: exit %d, last record %+v, stderr %q; want 254, a lost record on node 3, one line", code, last, errOut.String())
	}
	waitFor(t, 60*time.Second, started.Job+" running again once its node is back", func() (bool, string) {
		j, ok := c.lookup(started.Job)
		return ok && j.State == api.StateRunning, j.State
	})
	c.mustRun("--node", "1", "kill", "-s", "KILL", started.Job)
	c.waitFinished(started.Job, 30*time.Second)
}
