package cli

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// roam run's exit status is its jobs'; when roam itself fails (here: no
// agent at the socket) it is 255, as its help says, with the reason on
// standard error. Another command failing so exits 1.
func TestRunExitsTwoFiftyFiveWhenRoamFails(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--socket", sock, "run", "--", "/bin/true"}, 255},
		{[]string{"--socket", sock, "run", "-n", "0", "--", "/bin/true"}, 255},
		{[]string{"--socket", sock, "ps"}, 1},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.code || !strings.HasPrefix(errOut.String(), "roam: ") || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("roam %s: exit %d, stderr %q; want %d and one line", strings.Join(tc.args, " "), code, errOut.String(), tc.code)
		}
	}
}

// No command has a flag of the name of a global one (--cluster, --node,
// --socket): cobra would take it for both, and roam --node 1 ps would
// filter instead of asking node 1.
func TestNoFlagShadowsAGlobalOne(t *testing.T) {
	root := (&env{}).rootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if root.PersistentFlags().Lookup(f.Name) != nil {
				t.Errorf("roam %s has its own --%s, which shadows the global one", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// exitCase is a condition of a row of an exit-status table, provoked
// against a fake agent (nil jobs: no agent at all).
type exitCase struct {
	what string
	jobs []fakeJob
	args []string // after --socket SOCK
	// refuse: the agent refuses every request with this message.
	refuse string
	// stderr: a part of the one line on standard error; "" for none.
	stderr string
}

// Every row of roam run's exit-status table (exitStatuses, as --help and
// the man page print it) is provoked here and its status checked, and so
// is every row of the other commands' (otherExitStatuses): a row without
// a case, or a case whose status is not its row's, fails.
func TestExitStatusTable(t *testing.T) {
	ok := func(exit int) fakeJob { return fakeJob{node: "2", exit: exit, stdout: "out\n"} }
	lost := fakeJob{node: "3", lost: true}
	missing := filepath.Join(t.TempDir(), "no.roamckpt")
	runRows := map[string][]exitCase{
		"0": {
			{what: "every job exited 0", jobs: []fakeJob{ok(0), ok(0)}, args: []string{"run", "-n", "2", "--", "prog"}},
			{what: "-d: started", jobs: []fakeJob{ok(7)}, args: []string{"run", "-d", "--", "prog"}},
			{what: "attach, exited 0", jobs: []fakeJob{ok(0)}, args: []string{"attach", "1.1"}},
		},
		"1-253": {
			{what: "the first non-zero in job order", jobs: []fakeJob{ok(0), ok(3), ok(5)}, args: []string{"run", "-n", "3", "--", "prog"}},
			{what: "a lost job after it does not count first", jobs: []fakeJob{ok(4), lost}, args: []string{"run", "-n", "2", "--", "prog"}, stderr: "1.2 lost: node 3"},
			{what: "128+S as the agent reports it", jobs: []fakeJob{ok(143)}, args: []string{"run", "--", "prog"}},
			{what: "attach", jobs: []fakeJob{ok(0), ok(9)}, args: []string{"attach", "1.1", "1.2"}},
		},
		"254": {
			{what: "a job lost with its node", jobs: []fakeJob{lost}, args: []string{"run", "--", "prog"}, stderr: "1.1 lost: node 3 was declared dead"},
			{what: "lost first in job order", jobs: []fakeJob{lost, ok(3)}, args: []string{"run", "-n", "2", "--", "prog"}, stderr: "1.1 lost"},
		},
		"255": {
			{what: "no agent", args: []string{"run", "--", "prog"}, stderr: "no roam agent"},
			{what: "no agent, attach", args: []string{"attach", "1.1"}, stderr: "no roam agent"},
			{what: "-n 0", jobs: []fakeJob{ok(0)}, args: []string{"run", "-n", "0", "--", "prog"}, stderr: "-n: 0 is out of range"},
			{what: "a flag roam run does not have", jobs: []fakeJob{ok(0)}, args: []string{"run", "--nosuch", "--", "prog"}, stderr: "unknown flag: --nosuch"},
			{what: "a refused request", jobs: []fakeJob{ok(0)}, refuse: "limits.run_count: 9 jobs at most", args: []string{"run", "--", "prog"}, stderr: "limits.run_count"},
			{what: "restart of a file that is not there", jobs: []fakeJob{ok(0)}, args: []string{"restart", missing}, stderr: "no.roamckpt"},
		},
		"": {
			{what: "a job's own 254 comes through, with no line of roam's", jobs: []fakeJob{ok(254)}, args: []string{"run", "--", "prog"}},
			{what: "a job's own 255 comes through, with no line of roam's", jobs: []fakeJob{ok(255)}, args: []string{"run", "--", "prog"}},
		},
	}
	otherRows := map[string][]exitCase{
		"0": {
			{what: "ps", jobs: []fakeJob{ok(0)}, args: []string{"ps"}},
			{what: "kill", jobs: []fakeJob{ok(0)}, args: []string{"kill", "1.1"}},
		},
		"1": {
			{what: "no agent", args: []string{"ps"}, stderr: "no roam agent"},
			{what: "ps of a job not listed", jobs: []fakeJob{ok(0)}, args: []string{"ps", "9.9"}, stderr: "job 9.9: not found"},
			{what: "kill of a job not signalled", jobs: []fakeJob{ok(0)}, args: []string{"kill", "9.9"}, stderr: "unknown job 9.9"},
			{what: "bad input", jobs: []fakeJob{ok(0)}, args: []string{"kill", "-s", "NOPE", "1.1"}, stderr: `"NOPE" is not a signal`},
			{what: "--json where there is none", jobs: []fakeJob{ok(0)}, args: []string{"--json", "top"}, stderr: "no JSON form"},
		},
		"": {
			{what: "logs -f of a job that exited 3 exits 0", jobs: []fakeJob{ok(3)}, args: []string{"logs", "-f", "1.1"}},
		},
	}
	want := func(row string, c exitCase) int {
		switch {
		case row == "1-253" || row == "":
			for _, j := range c.jobs {
				if !j.lost && j.exit != 0 {
					return j.exit
				}
			}
		case row == "0" || row == "1" || row == "254" || row == "255":
			n, _ := strconv.Atoi(row)
			return n
		}
		t.Fatalf("row %q: no status", row)
		return 0
	}
	check := func(table string, rows [][2]string, cases map[string][]exitCase, logsRow bool) {
		for _, r := range rows {
			cs := cases[r[0]]
			if len(cs) == 0 {
				t.Errorf("%s: row %q (%s) is provoked by no case: add one", table, r[0], r[1])
			}
			for _, c := range cs {
				f := startFakeAgent(t, c.jobs...)
				if c.jobs == nil {
					f.sock = filepath.Join(t.TempDir(), "none.sock")
				}
				f.refuse = c.refuse
				if c.args[0] != "run" && c.args[0] != "restart" && len(c.jobs) > 0 && c.args[0] != "--json" {
					// Jobs to attach to, list, signal: started before.
					if code := run([]string{"--socket", f.sock, "run", "-d", "-n", strconv.Itoa(len(c.jobs)), "--", "prog"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
						t.Fatalf("starting the jobs of %q: %d", c.what, code)
					}
				}
				var out, errOut bytes.Buffer
				code := run(append([]string{"--socket", f.sock}, c.args...), &out, &errOut)
				w := want(r[0], c)
				if logsRow && c.args[0] == "logs" {
					w = 0
				}
				lines := strings.Count(errOut.String(), "\n")
				switch {
				case code != w:
					t.Errorf("%s row %q, %s: roam %s exited %d, want %d (stderr %q)", table, r[0], c.what, strings.Join(c.args, " "), code, w, errOut.String())
				case c.stderr == "" && errOut.Len() > 0:
					t.Errorf("%s row %q, %s: stderr %q, want nothing", table, r[0], c.what, errOut.String())
				case c.stderr != "" && (!strings.Contains(errOut.String(), c.stderr) || lines != 1):
					t.Errorf("%s row %q, %s: stderr %q, want one line with %q", table, r[0], c.what, errOut.String(), c.stderr)
				}
			}
		}
		for row := range cases {
			if !slices.ContainsFunc(rows, func(r [2]string) bool { return r[0] == row }) {
				t.Errorf("%s: cases for row %q, which the table does not have", table, row)
			}
		}
	}
	check("roam run", exitStatuses, runRows, false)
	check("other commands", otherExitStatuses, otherRows, true)
}
