package agent

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"roam/internal/agent/relay"
	"roam/internal/agent/rounds"
	"roam/internal/sched"
)

// The home drops the recent moves of a job once it learns the job
// ended (sched.Ledger.Ended), and only then: news of a job still running
// leaves them, and another job's move stays. Without the call in
// takeUpdates, the move of the ended job would still count in its
// target's load.
func TestHomeForgetsTheMovesOfAnEndedJob(t *testing.T) {
	a := newStoreAgent(t)
	now := time.Now()
	moves := []sched.Move{{Job: fzHome, From: fzSelf, To: "n3", At: now}, {Job: "n2.9", From: fzSelf, To: "n4", At: now}}
	var wg sync.WaitGroup
	a.rounds.Run(a.stop, &wg, a.rounds.Policy().Scheduler, rounds.Round{
		Snapshot: func() sched.Snapshot { return sched.Snapshot{Now: now} },
		Decide:   func(*sched.Scheduler, sched.Snapshot) []sched.Move { return moves },
		Move:     func(sched.Move) bool { return true },
	})
	wg.Wait()
	recent := func() []string {
		var ids []string
		for _, m := range a.rounds.Recent(time.Now()) {
			ids = append(ids, m.Job)
		}
		return ids
	}

	if _, err := a.news.TakeUpdates([]relay.Update{{ID: fzHome, Node: "n3", Out: []byte("x\n")}}); err != nil {
		t.Fatal(err)
	}
	if got := recent(); len(got) != 2 {
		t.Fatalf("after news of a running job: recent moves of %v, want both kept", got)
	}

	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(a.spools.Dir(fzHome), name))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	code := 0
	out, errs := size("stdout"), size("stderr")
	acks, err := a.news.TakeUpdates([]relay.Update{{ID: fzHome, Node: "n3", OutOff: out, ErrOff: errs, Exit: &code, FinalOut: out, FinalErr: errs}})
	if err != nil {
		t.Fatal(err)
	}
	if !acks[fzHome].Done {
		t.Fatalf("ack %+v: the job's end was not taken", acks[fzHome])
	}
	if got := recent(); len(got) != 1 || got[0] != "n2.9" {
		t.Fatalf("after job %s ended: recent moves of %v, want job n2.9's alone", fzHome, got)
	}
}
