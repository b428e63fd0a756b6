package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"roam/internal/api"
)

// Every command says what --json prints (a value, or a stream of one
// object a line) or why it has none; no reason is kept for a command
// that does not exist.
func TestEveryCommandHasAJSONFormOrSaysWhy(t *testing.T) {
	root := (&env{}).rootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen[c.CommandPath()] = true
		if c.Runnable() {
			form := c.Annotations[jsonForm]
			if form != jsonValue && form != jsonStream && (&env{json: true}).checkJSON(c) == nil {
				t.Errorf("roam %s: --json prints %q: give it a form (jsonVia) or say why it has none (noJSON)", c.CommandPath(), form)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	for path := range noJSON {
		// (The node package's roam has no cluster command: its exec is
		// not stale there.)
		if parent := path[:strings.LastIndex(path, " ")]; !seen[path] && seen[parent] {
			t.Errorf("noJSON names %q, which is no command", path)
		}
	}
}

// --json to a command without a JSON form is refused in one line, before
// the command does anything.
func TestJSONRefusedDoesNothing(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "made")
	cases := [][]string{{"--json", "top"}, {"--json", "completion", "bash"}}
	if c, _, err := (&env{}).rootCmd().Find([]string{"cluster", "exec"}); err == nil && c.Name() == "exec" {
		cases = append(cases, []string{"--cluster", "e2ejsnone", "--json", "cluster", "exec", "1", "--", "touch", mark})
	}
	for _, args := range cases {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "--json: no JSON form") || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("roam %s: exit %d, stdout %q, stderr %q; want 1, nothing, one line refusing --json", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("roam --json cluster exec ran its command")
	}
}

// records parses NDJSON: one JSON object a line, nothing else.
func records(t *testing.T, out string) []jobRecord {
	t.Helper()
	var rs []jobRecord
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			t.Fatalf("line %d is empty in %q", i+1, out)
		}
		var r jobRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || dec.More() {
			t.Fatalf("line %d is not one JSON object of a job stream: %q (%v)", i+1, line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// roam run --json of a sweep prints one object a line: each job started
// with its node, each line of its output (the last one, without a
// newline, marked partial; a line that is not UTF-8 as bytes), and its
// exit; the exit status is the table's. roam logs --json prints the same
// lines; roam run -d --json only the starts.
func TestJobStreamJSON(t *testing.T) {
	f := startFakeAgent(t,
		fakeJob{node: "2", stdout: "a\nb\n", exit: 0},
		fakeJob{node: "3", stdout: "no newline", stderr: "warn\n", exit: 3},
		fakeJob{node: "1", stdout: "\xff\xfe\n\n", exit: 0},
	)
	var out, errOut bytes.Buffer
	code := run([]string{"--socket", f.sock, "run", "--json", "-n", "3", "--", "prog"}, &out, &errOut)
	if code != 3 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 3 and nothing", code, errOut.String())
	}
	rs := records(t, out.String())
	text := func(s string) *string { return &s }
	want := map[string][]jobRecord{
		"1.1": {{Job: "1.1", Kind: "started", Node: "2"}, {Job: "1.1", Kind: "stdout", Text: text("a")}, {Job: "1.1", Kind: "stdout", Text: text("b")}, {Job: "1.1", Kind: "exit", ExitCode: new(int)}},
		"1.2": {{Job: "1.2", Kind: "started", Node: "3"}, {Job: "1.2", Kind: "stdout", Text: text("no newline"), Partial: true}, {Job: "1.2", Kind: "stderr", Text: text("warn")}, {Job: "1.2", Kind: "exit", ExitCode: func() *int { n := 3; return &n }()}},
		"1.3": {{Job: "1.3", Kind: "started", Node: "1"}, {Job: "1.3", Kind: "stdout", Bytes: []byte("\xff\xfe")}, {Job: "1.3", Kind: "stdout", Text: text("")}, {Job: "1.3", Kind: "exit", ExitCode: new(int)}},
	}
	got := map[string][]jobRecord{}
	for i, r := range rs {
		if r.Kind == "started" && i >= 3 {
			t.Errorf("record %d: a start after the output began: %+v", i, r)
		}
		got[r.Job] = append(got[r.Job], r)
	}
	for id, w := range want {
		g := got[id]
		// a job's stdout and stderr are read apart: compare each stream's order
		sameOrder := func(kind string) bool {
			var a, b []jobRecord
			for _, r := range g {
				if r.Kind == kind {
					a = append(a, r)
				}
			}
			for _, r := range w {
				if r.Kind == kind {
					b = append(b, r)
				}
			}
			return equalRecords(a, b)
		}
		for _, kind := range []string{"started", "stdout", "stderr", "exit"} {
			if !sameOrder(kind) {
				t.Errorf("job %s's %s records: %s, want %s", id, kind, show(g), show(w))
			}
		}
		if g[len(g)-1].Kind != "exit" {
			t.Errorf("job %s's last record is %+v, not its exit", id, g[len(g)-1])
		}
	}

	out.Reset()
	if code := run([]string{"--socket", f.sock, "--json", "logs", "1.2"}, &out, &errOut); code != 0 {
		t.Fatalf("logs: exit %d %s", code, errOut.String())
	}
	if got := records(t, out.String()); !equalRecords(got, want["1.2"][1:3]) && !equalRecords(got, []jobRecord{want["1.2"][2], want["1.2"][1]}) {
		t.Errorf("logs --json: %s, want %s", show(got), show(want["1.2"][1:3]))
	}

	out.Reset()
	if code := run([]string{"--socket", f.sock, "--json", "run", "-d", "-n", "2", "--", "prog"}, &out, &errOut); code != 0 {
		t.Fatalf("run -d: exit %d %s", code, errOut.String())
	}
	if got := records(t, out.String()); !equalRecords(got, []jobRecord{{Job: "1.4", Kind: "started", Node: "2"}, {Job: "1.5", Kind: "started", Node: "3"}}) {
		t.Errorf("run -d --json: %s", show(got))
	}
}

func equalRecords(a, b []jobRecord) bool {
	return show(a) == show(b)
}

func show(rs []jobRecord) string {
	b, _ := json.Marshal(rs)
	return string(b)
}

// roam events --json prints one event a line, each an api.Event.
func TestEventsJSONIsOneEventALine(t *testing.T) {
	f := startFakeAgent(t)
	f.events = []api.Event{{Node: "1", Kind: "place", Job: "1.1", To: "2", Why: "least loaded"}, {Node: "2", Kind: "migrate", Job: "1.1", From: "2", To: "3", Why: "balance"}}
	var out, errOut bytes.Buffer
	if code := run([]string{"--socket", f.sock, "events", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(f.events) {
		t.Fatalf("%d lines for %d events: %q", len(lines), len(f.events), out.String())
	}
	for i, l := range lines {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Kind != f.events[i].Kind || ev.Job != f.events[i].Job || ev.To != f.events[i].To {
			t.Errorf("line %d: %q (%v), want event %+v", i+1, l, err, f.events[i])
		}
	}
}

// Completion offers job ids (only live ones where a live job is needed),
// node ids, policy and signal names; with no agent it offers nothing and
// says nothing but cobra's directive.
func TestCompletion(t *testing.T) {
	f := startFakeAgent(t, fakeJob{node: "2", state: api.StateRunning}, fakeJob{node: "3"}, fakeJob{node: "1", state: api.StateStopped})
	if code := run([]string{"--socket", f.sock, "run", "-d", "-n", "3", "--", "prog"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatal("starting the jobs")
	}
	complete := func(sock string, args ...string) ([]string, string) {
		var out, errOut bytes.Buffer
		run(append([]string{"--socket", sock, "__complete"}, args...), &out, &errOut)
		var words []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if !strings.HasPrefix(l, ":") {
				w, _, _ := strings.Cut(l, "\t")
				words = append(words, w)
			}
		}
		return words, errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"kill", ""}, []string{"1.1", "1.3"}},
		{[]string{"kill", "1.1", ""}, []string{"1.3"}},
		{[]string{"logs", ""}, []string{"1.1", "1.2", "1.3"}},
		{[]string{"migrate", "1.1", ""}, []string{"1", "2", "home", "auto"}},
		{[]string{"node", "drain", ""}, []string{"1", "2"}},
		{[]string{"run", "--on", ""}, []string{"1", "2"}},
		{[]string{"kill", "-s", "US"}, []string{"USR1", "USR2"}},
		{[]string{"kill", "-s", "rtmin+1"}, []string{"RTMIN+1", "RTMIN+10", "RTMIN+11", "RTMIN+12", "RTMIN+13", "RTMIN+14", "RTMIN+15", "RTMIN+16", "RTMIN+17", "RTMIN+18", "RTMIN+19"}},
		{[]string{"policy", "load", "ba"}, []string{"balance"}},
	} {
		got, _ := complete(f.sock, tc.args...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("roam %s<TAB>: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
		for _, w := range got {
			if _, err := parseSignal(w); tc.args[1] == "-s" && err != nil {
				t.Errorf("completion offers signal %q, which roam kill refuses: %v", w, err)
			}
		}
	}
	none := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{{"kill", ""}, {"migrate", "1.1", ""}, {"node", "drain", ""}} {
		got, stderr := complete(none, args...)
		if len(got) != 0 || strings.Contains(stderr, "roam") || strings.Contains(stderr, "rror") {
			t.Errorf("no agent: roam %s<TAB>: %q, stderr %q; want nothing", strings.Join(args, " "), got, stderr)
		}
	}
}

// A job whose home's state disk was short when it ended has incomplete
// output (api.Output.Cut): an attached run and roam logs say so on
// stderr, with --json as a cut record before its exit, and roam ps -l in
// its exit column; its exit status is its own.
func TestIncompleteOutputIsSaid(t *testing.T) {
	const cut = "its last 10 bytes of output were dropped: its home's state disk was short (limits.disk_reserve_bytes)"
	f := startFakeAgent(t, fakeJob{node: "2", stdout: "a\n", exit: 0, cut: cut}, fakeJob{node: "2", stdout: "b\n", exit: 0, cut: cut})
	var out, errOut bytes.Buffer
	if code := run([]string{"--socket", f.sock, "run", "--", "prog"}, &out, &errOut); code != 0 || out.String() != "a\n" || !strings.Contains(errOut.String(), "1.1: output incomplete: "+cut) {
		t.Fatalf("run: exit %d, %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"--socket", f.sock, "logs", "1.1"}, &out, &errOut); code != 0 || out.String() != "a\n" || !strings.Contains(errOut.String(), "output incomplete: "+cut) {
		t.Fatalf("logs: exit %d, %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"--socket", f.sock, "ps", "-l"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "output incomplete: "+cut) {
		t.Fatalf("ps -l: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--socket", f.sock, "run", "--json", "--", "prog"}, &out, &errOut); code != 0 {
		t.Fatalf("run --json: exit %d", code)
	}
	rs := records(t, out.String())
	if n := len(rs); n < 2 || rs[n-2].Kind != "cut" || rs[n-2].Why != cut || rs[n-1].Kind != "exit" {
		t.Fatalf("run --json: %s, want a cut record before the exit", show(rs))
	}
}
