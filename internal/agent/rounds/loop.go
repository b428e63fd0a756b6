package rounds

import (
	"sync"
	"sync/atomic"
	"time"

	"roam/internal/sched"
)

// Loop runs the rounds until stop closes, when the ledger's pacing says:
// each period of the policy, and on a kick (a job starts or ends, moves
// went through) if the policy has a passive (jobs) probe.
//
// The period counts from the last round (or the last period or wake that
// ran none), not from a kick that ran none: an active policy runs no
// round on a kick, and kicks come often (a peer's load, a job's start or
// end), so counting from each would put its rounds off for good.
//
// wg holds the loop (Loop calls its Done) and the goroutines each round
// leaves running.
func (r *Rounds) Loop(stop <-chan struct{}, wg *sync.WaitGroup, rd Round) {
	defer wg.Done()
	from := time.Now()
	for {
		r.mu.Lock()
		next := r.ledger.NextRound(from, time.Duration(r.pol.Policy.Period), r.wake)
		r.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		tr := sched.ByPeriod
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		case <-r.kick:
			t.Stop()
			tr = sched.ByKick
		}
		r.mu.Lock()
		pol := r.pol.Scheduler
		due := r.ledger.RoundDue(tr, pol.Passive())
		r.mu.Unlock()
		if due {
			r.Run(stop, wg, pol, rd)
		}
		if due || tr == sched.ByPeriod {
			from = time.Now()
		}
	}
}

// Run runs one round of pol now: it takes a snapshot, decides, and
// starts the moves in the background, which the ledger records (Started,
// Finished): the moves to one node one after the other, those to
// different nodes side by side, up to the policy's parallel
// (sched.Lanes). Loop calls it when a round is due; no other round may
// start while it runs. The goroutine that waits for the moves' end is in
// group.
func (r *Rounds) Run(stop <-chan struct{}, group *sync.WaitGroup, pol *sched.Scheduler, rd Round) {
	snap := rd.Snapshot()
	moves := rd.Decide(pol, snap)
	r.mu.Lock()
	r.wake = pol.Wake(snap)
	r.ledger.Started(moves) // none: nothing runs
	r.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	var moved atomic.Bool
	var wg sync.WaitGroup
	for _, lane := range sched.Lanes(moves, pol.Parallel()) {
		wg.Go(func() {
			for _, mv := range lane {
				select {
				case <-stop:
					return
				default:
				}
				if rd.Move(mv) {
					moved.Store(true)
				}
			}
		})
	}
	group.Go(func() {
		wg.Wait()
		r.mu.Lock()
		again := r.ledger.Finished(moved.Load(), time.Now(), r.wake)
		r.mu.Unlock()
		if again {
			r.Kick()
		}
	})
}
