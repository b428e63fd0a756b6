package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/limits"
	"roam/internal/api"
	"roam/internal/job"
)

// recordsArgv is the command of the records budget's attack: one
// argument of 1.9 MiB, within limits.arg_bytes, and 128 of them within
// limits.run_bytes.
func recordsArgv() []string {
	return []string{"/bin/sleep", strings.Repeat("x", 1900<<10)}
}

// 80 runs of 128 jobs with 1.9 MiB of arguments each, from one non-root
// user (issue 44): each run's arguments are stored once for its sweep;
// the runs are refused once the user's records at the home would pass
// limits.records_bytes_per_user, each refusal naming the budget and the
// user and changing nothing; the agent then restarts with no more than
// the budget of records, and roam ps answers, each command line cut to
// a KiB, the whole of it for a job asked by id.
func TestAgentRecordsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1, 7, faults{}, "static")
		home := c.nodes[0].a
		argv := recordsArgv()
		budget := int64(limits.DefaultRecordsBytes)
		// A run's charge is its arguments once and 128 records: the
		// budget admits this many of them at most.
		maxRuns := int(budget / (1900 << 10))
		accepted := 0
		for run := range 80 {
			jobs := func() int { live, ended := home.jobs.UserJobs(sweepUser.UID); return live + len(ended) }
			had, rows := home.jobs.RecordsBytes(sweepUser.UID), jobs()
			_, err := home.launch.Run(sweepUser, api.RunRequest{Argv: argv, Cwd: "/", Count: 128, SweepRequest: api.SweepRequest{MaxRunning: 1}})
			if err == nil {
				accepted++
				if accepted > maxRuns {
					t.Fatalf("run %d accepted: %d runs hold %d bytes of records, past the budget of %d", run, accepted, home.jobs.RecordsBytes(sweepUser.UID), budget)
				}
				if st, _ := os.Stat(filepath.Join(c.nodes[0].cfg.StateDir, "state.db")); accepted == 1 && st != nil && st.Size() > 32<<20 {
					t.Fatalf("one run of 128 jobs made the job table %d bytes: its arguments are not stored once", st.Size())
				}
				continue
			}
			if !strings.Contains(err.Error(), "records budget of user 1001") || !strings.Contains(err.Error(), "limits.records_bytes_per_user") {
				t.Fatalf("run %d refused with %v; want the records budget named", run, err)
			}
			if now, n := home.jobs.RecordsBytes(sweepUser.UID), jobs(); now != had || n != rows {
				t.Fatalf("a refused run changed the records: %d bytes, %d jobs before; %d, %d after", had, rows, now, n)
			}
		}
		t.Logf("%d of 80 runs accepted, %d bytes of records held", accepted, home.jobs.RecordsBytes(sweepUser.UID))
		if accepted == 0 || accepted == 80 {
			t.Fatalf("%d of 80 runs accepted", accepted)
		}
		held := home.jobs.RecordsBytes(sweepUser.UID)
		if held > budget {
			t.Fatalf("the user's records are %d bytes, past the budget of %d", held, budget)
		}
		checkPS := func(a *Agent) {
			t.Helper()
			ps := a.PS(sweepUser, false)
			if len(ps) != accepted*128 {
				t.Fatalf("roam ps lists %d jobs; want %d", len(ps), accepted*128)
			}
			for _, j := range ps {
				if !j.CmdCut || len(j.Cmd) > job.MaxPSCmd {
					t.Fatalf("roam ps lists job %s's command of %d bytes (cut %v); want at most %d", j.ID, len(j.Cmd), j.CmdCut, job.MaxPSCmd)
				}
			}
			whole, err := a.control.PS(sweepUser, false, ps[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range whole {
				if j.ID == ps[0].ID && (j.CmdCut || j.Cmd != strings.Join(argv, " ")) {
					t.Fatalf("job %s asked by id: a command of %d bytes (cut %v); want the whole", j.ID, len(j.Cmd), j.CmdCut)
				}
			}
		}
		checkPS(home)

		c.crash(0)
		c.start(0)
		home = c.nodes[0].a
		if got := home.jobs.RecordsBytes(sweepUser.UID); got != held {
			t.Fatalf("after a restart the user's records are %d bytes; %d before", got, held)
		}
		checkPS(home)
	})
}

// A job table that holds more of a user's records than the budget (an
// older roam's, whose records each kept their own arguments): the agent
// starts with the user's live records first and its ended ones up to the
// budget, removes the rest from the store and says so in roam events;
// another user's records are all kept.
func TestAgentRecordsPastTheBudgetAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1, 8, faults{}, "static")
		c.crash(0)
		st, err := job.Open(filepath.Join(c.nodes[0].cfg.StateDir, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		argv := recordsArgv()
		now := time.Now()
		var recs []job.Record
		// 50 ended jobs of 1.9 MiB each: 95 MiB, past the 64 MiB budget;
		// one pending job, live, whose record is kept before them.
		for i := range 50 {
			recs = append(recs, job.Record{ID: "n1." + strconv.Itoa(100+i), UID: sweepUser.UID, Home: "n1", Argv: argv, State: job.StateFinished, Started: now, Ended: now})
		}
		recs = append(recs, job.Record{ID: "n1.200", UID: sweepUser.UID, Home: "n1", Argv: argv, State: job.StatePending, Started: now},
			job.Record{ID: "n1.201", UID: 1002, Home: "n1", Argv: []string{"/bin/true"}, State: job.StateFinished, Started: now, Ended: now})
		if err := st.PutRecords(recs...); err != nil {
			t.Fatal(err)
		}
		st.Close()

		c.start(0)
		home := c.nodes[0].a
		if got := home.jobs.RecordsBytes(sweepUser.UID); got > limits.DefaultRecordsBytes || got < limits.DefaultRecordsBytes/2 {
			t.Fatalf("the agent started with %d bytes of the user's records; budget %d", got, limits.DefaultRecordsBytes)
		}
		if _, err := home.jobs.HomeRecord("n1.200"); err != nil {
			t.Fatalf("the live job's record was not kept: %v", err)
		}
		if _, err := home.jobs.HomeRecord("n1.201"); err != nil {
			t.Fatalf("another user's record was not kept: %v", err)
		}
		kept := len(home.PS(sweepUser, false))
		if kept >= 51 || kept < 2 {
			t.Fatalf("%d of the user's 51 records kept", kept)
		}
		var said bool
		for _, e := range home.sched.Events(Caller{}, time.Time{}) {
			said = said || (e.Kind == "records" && strings.Contains(e.Why, "records budget of user 1001"))
		}
		if !said {
			t.Fatal("roam events does not say the records past the budget were removed")
		}
		// They are gone from the store too: the next start keeps the same.
		c.crash(0)
		c.start(0)
		if n := len(c.nodes[0].a.PS(sweepUser, false)); n != kept {
			t.Fatalf("%d records after a second start; %d after the first", n, kept)
		}
	})
}
