package agent

import (
	"testing"
	"time"

	"roam/internal/agent/reopen"
	"roam/internal/asuser"
	"roam/internal/job"
	"roam/internal/migrate"
)

// TestHomeDecidesARestartByItsRun: the home consents to a run once (the
// same run asking again gets the same consent), refuses a run it ended or
// refused before (a refused run took the refusal as its end),
// commits only the run its mark holds, and, once its marks are gone (an
// agent restart), still commits the run whose incarnation the record is
// and aborts any other.
func TestHomeDecidesARestartByItsRun(t *testing.T) {
	a := newStoreAgent(t)
	req := restartOfLost
	const runA, runB, runC, runD = "00000000000000a1", "00000000000000b1", "00000000000000c1", "00000000000000d1"
	ans, err := a.checkpoints.Reopen(req(runA))
	if err != nil || ans.ID != fzLost || ans.Inc != 1 {
		t.Fatalf("consent to run A: %+v, %v", ans, err)
	}
	if again, err := a.checkpoints.Reopen(req(runA)); err != nil || again != ans {
		t.Fatalf("run A asking again: %+v, %v; want %+v", again, err, ans)
	}
	if _, err := a.checkpoints.Reopen(req(runB)); err == nil {
		t.Fatal("run B consented while run A holds the job")
	}
	if err := a.jobs.ReopenEnded(reopen.Failed{MID: runA, ID: fzLost, Inc: 1, Error: "x"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.jobs.HomeRecord(fzLost); r.State != job.StateLost || r.Inc != 0 {
		t.Fatalf("after run A failed, the record is %s incarnation %d", r.State, r.Inc)
	}
	if _, err := a.checkpoints.Reopen(req(runA)); err == nil {
		t.Fatal("run A consented again after it ended")
	}
	if o := a.jobs.CommitRestart(fzLost, runA); o != migrate.Aborted {
		t.Fatalf("commit of the ended run A: %s", o)
	}
	if _, err := a.checkpoints.Reopen(req(runB)); err == nil {
		t.Fatal("run B, refused while run A held the job, consented once A ended")
	}
	if _, err := a.checkpoints.Reopen(req(runD)); err != nil {
		t.Fatalf("consent to run D: %v", err)
	}
	for range 2 {
		if o := a.jobs.CommitRestart(fzLost, runD); o != migrate.Committed {
			t.Fatalf("commit of run D: %s", o)
		}
	}
	a.jobs.ForgetRuns()
	if o := a.jobs.CommitRestart(fzLost, runD); o != migrate.Committed {
		t.Fatalf("commit of run D after the home's restart: %s", o)
	}
	if o := a.jobs.CommitRestart(fzLost, runC); o != migrate.Aborted {
		t.Fatalf("commit of run C, never consented: %s", o)
	}
	if _, err := a.checkpoints.Reopen(req(runC)); err == nil {
		t.Fatal("run C consented after its commit was refused")
	}
}

// A restart's run the home consented to and never heard of again (its
// node lost, its failure lost) is ended after reopen.RunLimit: the record
// goes back to what it was, and the run, if it still goes, is aborted at
// its commit.
func TestHomeEndsARunItHearsNothingOf(t *testing.T) {
	a := newStoreAgent(t)
	const run = "00000000000000d1"
	if _, err := a.checkpoints.Reopen(restartOfLost(run)); err != nil {
		t.Fatal(err)
	}
	if ended, err := a.jobs.ExpireRuns(time.Now().Add(reopen.RunLimit / 2)); err != nil || len(ended) != 0 {
		t.Fatalf("before the limit: ended %v, %v", ended, err)
	}
	if r, _ := a.jobs.HomeRecord(fzLost); r.State != job.StateRunning || r.Inc != 1 {
		t.Fatalf("while the run goes, the record is %s incarnation %d", r.State, r.Inc)
	}
	ended, err := a.jobs.ExpireRuns(time.Now().Add(reopen.RunLimit + time.Second))
	if err != nil || len(ended) != 1 || ended[0].MID != run {
		t.Fatalf("past the limit: ended %v, %v; want run %s", ended, err, run)
	}
	if r, _ := a.jobs.HomeRecord(fzLost); r.State != job.StateLost || r.Inc != 0 {
		t.Fatalf("after the run was ended, the record is %s incarnation %d, want lost 0 as before", r.State, r.Inc)
	}
	if o := a.jobs.CommitRestart(fzLost, run); o != migrate.Aborted {
		t.Fatalf("commit of the ended run: %s", o)
	}
}

// restartOfLost is run mid's request for the consent to restart the
// seeded lost job fzLost from its checkpoint.
func restartOfLost(mid string) reopen.Request {
	meta := migrate.CheckpointMeta{Version: migrate.CheckpointVersion, At: fzStarted.Add(time.Minute), Node: "n3",
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Started: fzStarted}}
	return reopen.Request{MID: mid, ID: fzLost, Meta: meta, Owner: asuser.Cred{UID: 1000}, Why: "roam restart"}
}
