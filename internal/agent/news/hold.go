package news

// The holds of the disk's budgets over the jobs running here: each user's
// output (limits.output_bytes_per_user) and the state disk's reserve
// (limits.disk_reserve_bytes). They run in a loop of their own, not in
// the push's: a push waits on the homes, and jobs writing as fast as they
// can fill a disk in the time a home takes to answer.

import (
	"fmt"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/job"
)

// HoldLoop holds the budgets every pushEvery while jobs run here, and,
// for closeFor after a hold that found the disk falling fast or short
// (limits.WatchClosely), looks at the state disk every diskEvery between
// them, holding at once when it calls for it (holdNow). It returns once
// Config.Stop closes.
func (r *Relay) HoldLoop() {
	t, d := time.NewTicker(pushEvery), time.NewTicker(diskEvery)
	defer t.Stop()
	defer d.Stop()
	var last int64 = -1 // the disk's free bytes at the last hold
	// room: what the user with the most output here had left of the
	// budget at the last hold.
	room := r.c.Limits.OutputBytesPerUser
	var lastAt, closeUntil time.Time
	for {
		tick, disk := t.C, d.C
		if !(r.c.Jobs.Count() > 0) {
			tick, disk = nil, nil
		}
		if !time.Now().Before(closeUntil) {
			disk = nil
		}
		select {
		case <-r.c.Stop:
			return
		case <-tick:
		case <-r.woken:
		case <-disk:
			if !r.holdNow(r.c.Free(), last, room) {
				continue
			}
		}
		free, now := r.c.Free(), time.Now()
		watch := r.c.Limits.WatchClosely(free, perHold(last, free, now.Sub(lastAt)), room)
		last, lastAt = free, now
		room = r.c.Limits.OutputBytesPerUser - r.hold(last)
		if watch || r.c.Limits.WatchClosely(free, 0, room) {
			closeUntil = now.Add(closeFor)
		}
	}
}

// perHold is what the disk would lose in a hold period (pushEvery) at
// the rate it went from last to free bytes free in took: 0 when it did
// not fall or either is unknown.
func perHold(last, free int64, took time.Duration) int64 {
	if last < 0 || free < 0 || free >= last {
		return 0
	}
	return int64(float64(last-free) * float64(pushEvery) / float64(max(took, diskEvery)))
}

// holdNow says whether the state disk, free bytes free and last at the
// last hold, calls for a hold before the next tick: it fell below the
// reserve and lower than at the last hold (a disk something else keeps
// short costs no more holds), or by more than room, what the user with
// the most output here had left of the budget then (a user's jobs may be
// past theirs; one past it already, whose jobs the last hold killed,
// calls for a hold at any fall until their output is gone).
func (r *Relay) holdNow(free, last, room int64) bool {
	if free < 0 || last < 0 {
		return false
	}
	return r.c.Limits.DiskShort(free, 0) != nil && free < last || last-free > max(room, 0)
}

// hold holds each user's jobs here against the user's output budget: past
// it, every job of the user here is killed, those that have not written
// yet too (jobs that start writing one after the other would each pass it
// by what they write between two holds). Then the disk's reserve
// (holdReserve), free being what the disk has free. Two stats a job a
// hold: the price of stopping them in time. It returns the most output
// one user's jobs here hold.
func (r *Relay) hold(free int64) (most int64) {
	refs, _ := r.c.Jobs.Refs()
	used := map[uint32]int64{}
	for _, it := range refs {
		used[it.Rec.UID] += spool.Blocks(it.Rec.Dir)
	}
	for _, it := range refs {
		if why := r.c.Limits.OutputOver(it.Rec.UID, used[it.Rec.UID]); why != "" && r.kill(it, why) {
			r.c.Log.Warn("job killed: its user's output limit", "job", it.Rec.ID, "uid", it.Rec.UID, "bytes", used[it.Rec.UID], "limit", r.c.Limits.OutputBytesPerUser)
		}
	}
	r.holdReserve(refs, used, free)
	for _, n := range used {
		most = max(most, n)
	}
	return most
}

// kill kills job it for why, unless it is killed already, moving, or
// ended by itself: ok says it was.
func (r *Relay) kill(it jobtable.JobRef, why string) bool {
	if it.Migrating {
		return false
	}
	if _, ended := job.ReadStatus(it.Rec.Dir); ended {
		return false
	}
	k, ok := r.c.Jobs.Kill(it.Rec.ID, it.Rec.PID, why)
	if ok {
		go r.c.Procs.Kill(k.Pid, k.Tix, 5*time.Second)
	}
	return ok
}

// holdReserve keeps the state disk's reserve (limits.disk_reserve_bytes)
// for the agent's own writes: below it, the running jobs here of the
// users whose output takes the most of the disk (their jobs killed
// already too) are killed (limits.ReserveVictims), so that the users with
// little output run on. Users each within their budget can fill a disk
// together, and a job can write much between two holds. used is each
// user's output here, free what the disk has free.
func (r *Relay) holdReserve(items []jobtable.JobRef, used map[uint32]int64, free int64) {
	short := r.c.Limits.DiskShort(free, 0)
	if short == nil {
		return
	}
	for _, uid := range r.c.Limits.ReserveVictims(free, used) {
		why := fmt.Sprintf("killed: %v, and user %d's jobs held the most output there (%s)", short, uid, api.Bytes(used[uid]))
		killed := 0
		for _, it := range items {
			if it.Rec.UID == uid && r.kill(it, why) {
				killed++
			}
		}
		if killed > 0 {
			r.c.Log.Warn("jobs killed: the state disk's reserve", "uid", uid, "jobs", killed, "bytes", used[uid], "free", free, "reserve", r.c.Limits.DiskReserveBytes)
		}
	}
}
