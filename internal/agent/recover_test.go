package agent

import (
	"testing"
	"time"

	"roam/internal/migrate"
)

// An agent that died after its job table adopted a migrated copy and
// before it let the copy run finds, when it starts again, a committed
// record not marked resumed: it lets the copy run and marks the record.
// One that had resumed the copy leaves the job as it is (its user may
// have stopped it since): the record says so.
func TestRecoveryResumesAnAdoptedCopy(t *testing.T) {
	for _, resumed := range []bool{false, true} {
		a := newStoreAgent(t)
		// The copy, fzLocal's fzPID, is in the job table (the seed) and
		// stopped, as a restore leaves it.
		a.node.w.mu.Lock()
		p := a.node.proc(fzPID, fzTix)
		if p == nil {
			a.node.w.mu.Unlock()
			t.Fatalf("no process %d in the fake node", fzPID)
		}
		a.node.w.set(p, frozen, "restored")
		a.node.w.mu.Unlock()
		now := time.Now()
		rec := migrate.InRecord{MID: fzMID, Job: fzLocal, From: "n2", State: migrate.DstCommitted, PID: fzPID, Tix: fzTix,
			Started: now.Add(-time.Second), ReadyAt: now.Add(-time.Second), EndedAt: now, Resumed: resumed}
		if err := a.store.PutIn(rec); err != nil {
			t.Fatal(err)
		}
		a.in.Recover(now, nil)
		state := func() (byte, bool) {
			a.node.w.mu.Lock()
			defer a.node.w.mu.Unlock()
			ins, err := a.store.Ins()
			if err != nil || len(ins) != 1 {
				t.Fatalf("the ledger: %v, %v", ins, err)
			}
			return byte(a.node.proc(fzPID, fzTix).state), ins[0].Resumed
		}
		if resumed {
			a.wg.Wait() // what recovery started, if anything
			if st, _ := state(); st != byte(frozen) {
				t.Fatalf("a copy resumed before the agent's restart was let run again (state %c)", st)
			}
			continue
		}
		waitUntil(t, 10*time.Second, "the adopted copy runs, its record marked resumed", func() bool {
			st, marked := state()
			return st == byte(running) && marked
		})
		if l, ok := a.jobs.LocalRec(fzLocal); !ok || l.PID != fzPID {
			t.Fatalf("job %s is no longer the table's as pid %d: %+v, %v", fzLocal, fzPID, l, ok)
		}
	}
}
