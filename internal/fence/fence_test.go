package fence

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Step's table: every state against a lease's age.
func TestStep(t *testing.T) {
	c := Config{Lease: 10 * time.Second, Kill: 20 * time.Second, Margin: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		fenced bool
		st     State
		age    time.Duration
		want   State
		do     Do
	}{
		{true, Running, 0, Running, None},
		{true, Running, 10 * time.Second, Stopped, Stop},
		{true, Running, 20 * time.Second, Killed, Kill}, // an agent too late to stop kills at once
		{true, Stopped, 15 * time.Second, Stopped, None},
		{true, Stopped, 5 * time.Second, Running, Thaw}, // renewed before Kill
		{true, Stopped, 20 * time.Second, Killed, Kill},
		{true, Killed, 0, Killed, None}, // final: a late ack brings nothing back
		{false, Running, time.Hour, Running, None},
		{false, Stopped, time.Hour, Running, Thaw}, // no longer fenced
	} {
		l, do := c.Step(Lease{Fenced: tc.fenced, Renewed: t0, State: tc.st}, t0.Add(tc.age))
		if l.State != tc.want || do != tc.do {
			t.Errorf("fenced %v, %v, age %v: got %v %v, want %v %v", tc.fenced, tc.st, tc.age, l.State, do, tc.want, tc.do)
		}
	}
	if l := Renew(Lease{Renewed: t0}, t0.Add(-time.Second)); !l.Renewed.Equal(t0) {
		t.Errorf("an older ack renewed the lease back to %v", l.Renewed)
	}
}

func TestValidate(t *testing.T) {
	if key, err := DefaultConfig().Validate(); err != nil {
		t.Fatal(key, err)
	}
	for _, c := range []Config{
		{Lease: 0, Kill: time.Minute, Margin: time.Second},
		{Lease: 10 * time.Second, Kill: 10 * time.Second, Margin: time.Second},
		{Lease: 10 * time.Second, Kill: 20 * time.Second, Margin: 0},
		{Lease: 10 * time.Second, Kill: 9 * time.Minute, Margin: 2 * time.Minute},
	} {
		if _, err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
	// By default a home restarts a lost job within 60 s of its node's
	// last news, its 5 s sweep included.
	if d := DefaultConfig(); d.Kill+d.Margin+5*time.Second > time.Minute {
		t.Errorf("default Kill+Margin %v: over the 60 s bound", d.Kill+d.Margin)
	}
}

// sim is one job of node N whose home is H, driven on a global clock in
// ticks; each side reads only its own clock (an offset of the global
// one). Messages are pushes (N to H, carrying their send time) and acks
// (H to N, carrying it back).
type sim struct {
	c              Config
	rng            *rand.Rand
	now            time.Duration // global
	offN, offH     time.Duration // the clocks' offsets
	linkUpAt       time.Duration // the link is cut until then
	nStall, hStall time.Duration // an agent does nothing until then
	nDown, hDown   bool          // an agent is restarting (until its stall ends)
	lease, saved   Lease         // N's lease, and what its agent persisted of it
	lastPush       time.Duration
	heard, started time.Time // H's
	msgs           []msg
	alive          bool // the original can still run
	stopped        int  // times N stopped it
	thawed         int  // times N thawed it
}

type msg struct {
	at   time.Duration // delivered then (global)
	ack  bool
	sent time.Time // the push's send time, by N's clock
}

const tick = 50 * time.Millisecond

var epoch = time.Unix(1_700_000_000, 0)

func (s *sim) nodeNow() time.Time { return epoch.Add(s.now + s.offN) }
func (s *sim) homeNow() time.Time { return epoch.Add(s.now + s.offH) }

// step advances one tick: faults start at random, both agents act, and
// it reports whether the home may restart the job while its original
// can still run.
func (s *sim) step(maxStall time.Duration, faults bool) (violated bool) {
	s.now += tick
	if faults {
		s.inject(maxStall)
	}
	s.deliver()
	if s.now >= s.nStall {
		if s.nDown {
			// The agent starts again with what it persisted.
			s.nDown, s.lease = false, s.saved
		}
		s.nodeActs()
	}
	if s.now >= s.hStall && s.hDown {
		// It starts again knowing nothing of what it heard.
		s.hDown, s.heard, s.started = false, time.Time{}, s.homeNow()
	}
	return s.now >= s.hStall && s.alive && s.c.MayRestart(s.heard, s.started, s.homeNow(), 0)
}

func (s *sim) inject(maxStall time.Duration) {
	r := s.rng.Float64()
	dur := func(most time.Duration) time.Duration { return time.Duration(s.rng.Int64N(int64(most)) + 1) }
	switch {
	case r < 0.0005: // a cut, up to twice Kill+Margin
		s.linkUpAt = s.now + dur(2*(s.c.Kill+s.c.Margin))
	case r < 0.003 && s.now >= s.nStall: // N's agent stalls
		s.nStall = s.now + dur(maxStall)
	case r < 0.004 && s.now >= s.nStall: // N's agent restarts (down as long as a stall)
		s.nStall, s.nDown = s.now+dur(maxStall), true
	case r < 0.005 && s.now >= s.hStall: // H's agent stalls
		s.hStall = s.now + dur(2*s.c.Lease)
	case r < 0.006 && s.now >= s.hStall: // H's agent restarts
		s.hStall, s.hDown = s.now+dur(s.c.Lease), true
	}
}

// deliver delivers the messages due: lost on a cut link or to an agent
// that is restarting, held by a stalled one.
func (s *sim) deliver() {
	var kept []msg
	for _, m := range s.msgs {
		switch {
		case m.at > s.now:
			kept = append(kept, m)
		case s.now < s.linkUpAt:
		case m.ack && s.nDown:
		case m.ack && s.now < s.nStall:
			kept = append(kept, m)
		case m.ack:
			s.lease = Renew(s.lease, m.sent)
		case s.hDown:
		case s.now < s.hStall:
			kept = append(kept, m)
		default:
			s.heard = s.homeNow()
			s.msgs = append(kept, msg{at: s.now + s.delay(), ack: true, sent: m.sent})
			kept = s.msgs
		}
	}
	s.msgs = kept
}

func (s *sim) delay() time.Duration { return time.Duration(s.rng.Int64N(int64(2 * time.Second))) }

// nodeActs is N's agent's turn: the lease's step, a push when one is
// due, and now and then a save of the lease.
func (s *sim) nodeActs() {
	l, do := s.c.Step(s.lease, s.nodeNow())
	s.lease = l
	switch do {
	case Kill:
		s.alive = false
	case Stop:
		s.stopped++
	case Thaw:
		s.thawed++
	}
	if s.now-s.lastPush >= s.c.HeartbeatEvery() {
		s.lastPush = s.now
		if s.now >= s.linkUpAt {
			s.msgs = append(s.msgs, msg{at: s.now + s.delay(), sent: s.nodeNow()})
		}
	}
	if s.rng.IntN(20) == 0 {
		s.saved = s.lease
	}
}

func newSim(c Config, seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &sim{c: c, rng: rng, alive: true,
		offN: time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute,
		offH: time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute}
	s.lease = Lease{Fenced: true, Renewed: s.nodeNow()}
	s.saved = s.lease
	s.started = s.homeNow()
	return s
}

// The invariant under random cuts, message delays, stalls and restarts
// of either agent: the home may restart the job only once its original
// is dead, as long as the node's agent stalls for less than Margin.
func TestRestartedCopyNeverRunsBesideItsOriginal(t *testing.T) {
	c := Config{Lease: 4 * time.Second, Kill: 8 * time.Second, Margin: 3 * time.Second}
	runs, restarted, thawed := 2000, 0, 0
	for seed := range uint64(runs) {
		s := newSim(c, seed)
		for range 4000 { // 200 s each
			if s.step(c.Margin-tick, true) {
				t.Fatalf("seed %d at %v: the home may restart the job while its original runs (lease %+v, heard %v)", seed, s.now, s.lease, s.heard)
			}
			if !s.alive {
				restarted++
				break
			}
		}
		thawed += s.thawed
	}
	// The faults must have cut off enough runs for the test to mean something.
	if restarted < runs/10 || thawed == 0 {
		t.Fatalf("%d of %d runs lost their job, %d thaws: the faults are too mild", restarted, runs, thawed)
	}
	t.Logf("%d of %d runs killed their job, %d thaws", restarted, runs, thawed)
}

// The bound is Margin: a node's agent that stalls past it can leave its
// job running after the home may restart it. This is what the fencing
// does not cover (docs/deploy.md).
func TestStallLongerThanMarginIsNotCovered(t *testing.T) {
	c := Config{Lease: 4 * time.Second, Kill: 8 * time.Second, Margin: 3 * time.Second}
	s := newSim(c, 1)
	s.linkUpAt = 1000 * time.Second
	s.nStall = c.Kill + c.Margin + time.Second
	for range 400 {
		if s.step(0, false) {
			return
		}
	}
	t.Fatal("a stall longer than Kill+Margin went unnoticed: the simulation does not model stalls")
}

// Without cuts, and with stalls shorter than a lease less a heartbeat and
// a round trip, a job is never stopped; a job with no checkpoint is
// never stopped at all, through any cut.
func TestNoFaultNoFence(t *testing.T) {
	// A lease less a heartbeat (2.5 s) and a round trip (4 s at most).
	c := Config{Lease: 10 * time.Second, Kill: 20 * time.Second, Margin: 3 * time.Second}
	for seed := range uint64(200) {
		s := newSim(c, seed)
		for i := range 4000 {
			if i%500 == 0 && s.now >= s.nStall {
				s.nStall = s.now + time.Duration(s.rng.Int64N(int64(3*time.Second)))
			}
			s.step(0, false)
		}
		if s.stopped > 0 || !s.alive {
			t.Fatalf("seed %d: stopped %d times, alive %v, with no cut", seed, s.stopped, s.alive)
		}
	}
	s := newSim(c, 7)
	s.lease.Fenced = false
	s.linkUpAt = time.Hour
	for range 4000 {
		s.step(0, false)
	}
	if s.stopped > 0 || !s.alive {
		t.Fatal("a job with no checkpoint was fenced")
	}
}

// A home waits for the longer of its own Kill and the lost node's (as
// the node said it): a node configured with a longer Kill than its home
// is not restarted from before it kills.
func TestRestartAtWaitsForTheNodesKill(t *testing.T) {
	c := DefaultConfig()
	heard, started := time.Unix(1000, 0), time.Unix(900, 0)
	for _, tc := range []struct {
		theirs time.Duration
		want   time.Duration
	}{
		{0, 50 * time.Second},                // an older node: the home's own
		{10 * time.Second, 50 * time.Second}, // shorter: the home's own
		{40 * time.Second, 50 * time.Second},
		{80 * time.Second, 90 * time.Second}, // longer: the node's
	} {
		if got := c.RestartAt(heard, started, tc.theirs).Sub(heard); got != tc.want {
			t.Errorf("node's kill %v: restart %v after its news, want %v", tc.theirs, got, tc.want)
		}
	}
	// After a restart of the home, from its start.
	if got := c.RestartAt(heard, heard.Add(time.Minute), 0).Sub(heard); got != time.Minute+50*time.Second {
		t.Errorf("home restarted after the news: %v", got)
	}
}
