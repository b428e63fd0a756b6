package load

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func ids(v *Vector) []string {
	var out []string
	for _, e := range v.Entries() {
		out = append(out, e.Node)
	}
	return out
}

func TestFIFOOverwritesOldest(t *testing.T) {
	v := NewVector(3, PolicyFIFO)
	for i := 1; i <= 3; i++ {
		if !v.Update(Entry{Node: fmt.Sprint(i), Load: float64(i)}, 0) {
			t.Fatalf("entry %d not kept in a vector with room", i)
		}
	}
	// Full: a new node evicts the oldest (1), whatever the loads.
	if !v.Update(Entry{Node: "4", Load: 99}, 0) {
		t.Fatal("fifo refused an entry")
	}
	if got, want := ids(v), []string{"2", "3", "4"}; !slices.Equal(got, want) {
		t.Fatalf("vector = %v, want %v", got, want)
	}
	// A known node refreshes in place and keeps its slot.
	v.Update(Entry{Node: "3", Load: 7}, 0)
	if got, want := ids(v), []string{"2", "3", "4"}; !slices.Equal(got, want) {
		t.Fatalf("after refresh vector = %v, want %v", got, want)
	}
	if e, _ := v.Get("3"); e.Load != 7 {
		t.Fatalf("refresh did not update the load: %v", e.Load)
	}
}

func TestBeneficialKeepsOnlyLessLoaded(t *testing.T) {
	v := NewVector(2, PolicyBeneficial)
	v.Update(Entry{Node: "a", Load: 5}, 1) // room: kept whatever the load
	v.Update(Entry{Node: "b", Load: 5}, 1)
	if got := ids(v); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("vector = %v", got)
	}
	// Full; remote load 3 is not lower than local 2: discarded.
	if v.Update(Entry{Node: "c", Load: 3}, 2) {
		t.Fatal("beneficial kept an entry more loaded than the local node")
	}
	// Equal load is not lower either.
	if v.Update(Entry{Node: "c", Load: 2}, 2) {
		t.Fatal("beneficial kept an entry as loaded as the local node")
	}
	if got := ids(v); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("vector changed on a refused entry: %v", got)
	}
	// Lower: kept, oldest goes.
	if !v.Update(Entry{Node: "c", Load: 1}, 2) {
		t.Fatal("beneficial refused a less loaded entry")
	}
	if got := ids(v); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("vector = %v, want [b c]", got)
	}
	// A known node is refreshed even when its load went up.
	if !v.Update(Entry{Node: "b", Load: 50}, 2) {
		t.Fatal("refresh of a known node refused")
	}
	if e, _ := v.Get("b"); e.Load != 50 {
		t.Fatalf("known node not refreshed: %v", e.Load)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, ok := range []string{"fifo", "beneficial"} {
		if _, err := ParsePolicy(ok); err != nil {
			t.Errorf("ParsePolicy(%q): %v", ok, err)
		}
	}
	_, err := ParsePolicy("lifo")
	if !errors.Is(err, ErrBadPolicy) || err.Error() != `unknown load-vector policy "lifo" (allowed: fifo, beneficial)` {
		t.Fatalf("ParsePolicy(lifo) = %v", err)
	}
}

func TestChooseTargetsEdgeCases(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	if got := ChooseTargets("1", nil, nil, rng); got != nil {
		t.Fatalf("empty cluster: %v", got)
	}
	if got := ChooseTargets("1", []string{"1"}, []string{"1"}, rng); got != nil {
		t.Fatalf("one-node cluster: %v", got)
	}
	if got := ChooseTargets("1", []string{"1", "2"}, nil, rng); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("two-node cluster: %v", got)
	}
	// A recent contact that is no longer a member is not chosen.
	for i := 0; i < 50; i++ {
		got := ChooseTargets("1", []string{"1", "2", "3"}, []string{"9"}, rng)
		if len(got) != 2 || slices.Contains(got, "9") || slices.Contains(got, "1") || got[0] == got[1] {
			t.Fatalf("targets %v", got)
		}
	}
}

func TestChooseTargetsOneRecentOneRandom(t *testing.T) {
	all := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	recent := []string{"3", "6"}
	rng := rand.New(rand.NewSource(42))
	firstCount := map[string]int{}
	secondCount := map[string]int{}
	const n = 4000
	for i := 0; i < n; i++ {
		got := ChooseTargets("1", all, recent, rng)
		if len(got) != 2 || got[0] == got[1] {
			t.Fatalf("targets %v", got)
		}
		if !slices.Contains(recent, got[0]) {
			t.Fatalf("first target %s is not a recent contact", got[0])
		}
		if got[1] == "1" {
			t.Fatal("chose self")
		}
		firstCount[got[0]]++
		secondCount[got[1]]++
	}
	// First: only the two recent contacts, about evenly.
	if len(firstCount) != 2 || firstCount["3"] < n/3 || firstCount["6"] < n/3 {
		t.Fatalf("first target distribution %v", firstCount)
	}
	// Second: every other node is reached.
	for _, id := range all[1:] {
		if secondCount[id] == 0 {
			t.Fatalf("node %s never chosen at random: %v", id, secondCount)
		}
	}
	// Same seed, same choices: the function is deterministic.
	a := ChooseTargets("1", all, recent, rand.New(rand.NewSource(7)))
	b := ChooseTargets("1", all, slices.Clone(recent), rand.New(rand.NewSource(7)))
	if !slices.Equal(a, b) {
		t.Fatalf("same seed gave %v and %v", a, b)
	}
}

func TestDisseminatorTickAndRecent(t *testing.T) {
	d := NewDisseminator("1", 8, PolicyFIFO, time.Second)
	rng := rand.New(rand.NewSource(3))
	t0 := time.Unix(1000, 0)
	members := []string{"1", "2", "3", "4"}
	if got := d.Tick(t0, members, rng); len(got) != 2 {
		t.Fatalf("first tick sent to %v", got)
	}
	if got := d.Tick(t0.Add(500*time.Millisecond), members, rng); got != nil {
		t.Fatalf("tick before the interval sent to %v", got)
	}
	d.Receive(t0, Entry{Node: "4", Load: 1, Capacity: 1}, 0)
	for i := 0; i < 20; i++ {
		now := t0.Add(time.Duration(i+1) * time.Second)
		got := d.Tick(now, members, rng)
		if now.Sub(t0) <= d.RecentWindow && got[0] != "4" {
			t.Fatalf("at %v first target %s, want the recent contact 4", now.Sub(t0), got[0])
		}
	}
	if r := d.Recent(t0.Add(20 * time.Second)); len(r) != 0 {
		t.Fatalf("contact still recent after the window: %v", r)
	}
	if d.Receive(t0, Entry{Node: "1"}, 0) {
		t.Fatal("kept our own entry")
	}
	d.Forget("4")
	if d.Vector.Len() != 0 {
		t.Fatal("Forget left the entry")
	}
}

func TestMessageRoundTrip(t *testing.T) {
	in := Entry{Node: "3", Addr: "198.18.0.3:7946", Capacity: 0.25, Load: 4, MemFreeMB: 512}
	out, err := DecodeMessage(EncodeMessage(in))
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := EncodeMessage(Entry{Node: "1", Capacity: 1})
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":       {nil, ErrMalformed},
		"version":     {append([]byte{9}, good[1:]...), ErrMalformed},
		"truncated":   {good[:len(good)-3], ErrMalformed},
		"trailing":    {append(slices.Clone(good), []byte(`{}`)...), ErrMalformed},
		"unknown key": {append([]byte{MsgVersion}, []byte(`{"n":"1","c":1,"x":1}`)...), ErrMalformed},
		"no node":     {append([]byte{MsgVersion}, []byte(`{"c":1}`)...), ErrMalformed},
		"neg load":    {append([]byte{MsgVersion}, []byte(`{"n":"1","c":1,"l":-1}`)...), ErrMalformed},
		"zero cap":    {append([]byte{MsgVersion}, []byte(`{"n":"1","c":0}`)...), ErrMalformed},
		"oversized":   {make([]byte, MaxMessageSize+1), ErrOversized},
	}
	for name, c := range cases {
		if _, err := DecodeMessage(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

// Any bytes at all: DecodeMessage returns an entry or an error, never panics,
// and an accepted entry is one that passes the checks.
func TestDecodeNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 2*MaxMessageSize).Draw(t, "b")
		if rapid.Bool().Draw(t, "valid-prefix") && len(b) > 0 {
			b[0] = MsgVersion
		}
		e, err := DecodeMessage(b)
		if err == nil && (e.Node == "" || e.Capacity <= 0 || e.Load < 0) {
			t.Fatalf("accepted an invalid entry %+v", e)
		}
	})
}

// Property: whatever the sequence of updates, the vector never exceeds its
// size and never holds two entries for one node.
func TestVectorInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 8).Draw(t, "size")
		pol := rapid.SampledFrom(Policies).Draw(t, "policy")
		v := NewVector(size, pol)
		for i, n := 0, rapid.IntRange(0, 50).Draw(t, "n"); i < n; i++ {
			e := Entry{Node: fmt.Sprint(rapid.IntRange(0, 12).Draw(t, "node")), Load: rapid.Float64Range(0, 10).Draw(t, "load")}
			v.Update(e, rapid.Float64Range(0, 10).Draw(t, "local"))
			got := ids(v)
			if len(got) > size {
				t.Fatalf("vector grew to %d > %d", len(got), size)
			}
			sorted := slices.Sorted(slices.Values(got))
			if len(slices.Compact(sorted)) != len(got) {
				t.Fatalf("duplicate node in %v", got)
			}
		}
	})
}

// A node one of whose jobs ended or left tells at once the nodes that
// would gain by sending it one, and no other; not twice within a quarter
// interval (the second fall is told after it), not for a dip in the load
// with no job gone (a job sleeping for a moment), and not for a fall of
// less than three quarters of a job, unless the node is idle now.
func TestNewsOfAFallGoesToTheBusierNodes(t *testing.T) {
	d := NewDisseminator("1", 8, PolicyFIFO, time.Second)
	t0 := time.Unix(1000, 0)
	for _, e := range []Entry{{Node: "2", Capacity: 0.2, Load: 15}, {Node: "3", Capacity: 0.2, Load: 10}, {Node: "4", Capacity: 0.2, Load: 5}, {Node: "5", Capacity: 0.2, Load: 0}} {
		d.Receive(t0, e, 10)
	}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if got := d.News(at(0), 2, 10, 10, 0.2); got != nil {
		t.Fatalf("news with no job gone: %v", got)
	}
	// Its 2 jobs ran (load 10 at 0.2 CPU); one sleeps: the load dips to
	// 5, but no job ended.
	if got := d.News(at(250), 2, 5, 10, 0.2); got != nil {
		t.Fatalf("a sleeping job's dip is news to %v", got)
	}
	// Both ended: nodes 2 and 3 would gain by sending it one (5 with it,
	// under their 15 and 10); node 4 would not (it would swap 5 for 5),
	// nor would idle node 5.
	if got := d.News(at(500), 0, 0, 10, 0.2); !slices.Equal(got, []string{"2", "3"}) {
		t.Fatalf("news of two jobs ending (load 10 to 0) went to %v, want [2 3]", got)
	}
	// Two start, one ends within a quarter interval: told after it.
	d.News(at(510), 2, 10, 10, 0.2)
	if got := d.News(at(600), 1, 5, 9.99, 0.2); got != nil {
		t.Fatalf("news again within a quarter interval: %v", got)
	}
	if got := d.News(at(760), 1, 5, 9.99, 0.2); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("news held back by the quarter interval went to %v, want [2] (a smoothed load nears the step, never reaches it)", got)
	}
	if got := d.News(at(800), 1, 5, 10, 0.2); got != nil {
		t.Fatalf("the same fall told twice: %v", got)
	}
	// A job ended that hardly ran: a fall under three quarters of a job.
	d.News(at(2000), 2, 7, 10, 0.2)
	if got := d.News(at(3000), 1, 7, 10, 0.2); got != nil {
		t.Fatalf("a fall of less than three quarters of a job (10 to 7 at 5 a job) is news to %v", got)
	}
	// A node gone idle is news, however little its smoothed load rose:
	// its one job ended half a second after it came (sent 2, under three
	// quarters of a job), and the busier nodes see 2 until told 0.
	d.News(at(4000), 1, 5, 2, 0.2)
	if got := d.News(at(5000), 0, 0, 2, 0.2); !slices.Equal(got, []string{"2", "3"}) {
		t.Fatalf("news of the node gone idle (sent 2, now 0) went to %v, want [2 3]", got)
	}
	e := NewDisseminator("1", 8, PolicyFIFO, time.Second)
	e.News(t0, 1, 5, 5, 0.2)
	if got := e.News(at(500), 0, 0, 5, 0.2); got != nil {
		t.Fatalf("news with an empty vector went to %v", got)
	}
	d.News(at(6000), 1, 5, 5, 0)
	if got := d.News(at(7000), 0, 0, 5, 0); got != nil {
		t.Fatalf("news with no capacity went to %v", got)
	}
}

// An entry is news for the scheduler when its node could take one of
// this node's threads and could not before.
func TestEasesWhenAPeerGainsRoom(t *testing.T) {
	busy := Entry{Node: "2", Capacity: 0.2, Load: 10}
	idle := Entry{Node: "2", Capacity: 0.2, Load: 0}
	cases := []struct {
		name string
		prev Entry
		had  bool
		e    Entry
		self float64
		want bool
	}{
		{"went idle", busy, true, idle, 15, true},
		{"first heard, idle", Entry{}, false, idle, 15, true},
		{"first heard, busy", Entry{}, false, busy, 15, false},
		{"idle and still idle", idle, true, idle, 15, false},
		{"fell by a job, room before too", Entry{Node: "2", Capacity: 0.2, Load: 5}, true, idle, 15, true},
		{"fell by less than half a job", Entry{Node: "2", Capacity: 0.2, Load: 2}, true, idle, 15, false},
		{"went idle, but this node is no busier", busy, true, idle, 5, false},
		{"no capacity", busy, true, Entry{Node: "2", Load: 0}, 15, false},
	}
	for _, tc := range cases {
		if got := Eases(tc.prev, tc.had, tc.e, tc.self); got != tc.want {
			t.Errorf("%s: Eases = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Eased says yes at most once per quarter interval.
	d := NewDisseminator("1", 8, PolicyFIFO, time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   time.Duration
		e    Entry
		want bool
	}{
		{0, busy, false}, {0, idle, true}, {100 * time.Millisecond, idle, false},
		{249 * time.Millisecond, idle, false}, {250 * time.Millisecond, idle, true}, {300 * time.Millisecond, idle, false},
	} {
		if got := d.Eased(t0.Add(c.at), busy, true, c.e, 15); got != c.want {
			t.Errorf("Eased at %v, load %.0f: %v, want %v", c.at, c.e.Load, got, c.want)
		}
	}
}

// A message of an older roam, without the memory for jobs and the memory
// held, decodes with neither (placement then does not count that node's
// memory); a node that counts none and holds none sends neither, so that
// an older roam, which refuses fields it does not know, still hears it.
func TestMessageWithoutMemoryRequests(t *testing.T) {
	old := []byte("\x01{\"n\":\"n2\",\"a\":\"10.0.0.2:7947\",\"c\":1,\"l\":0.5,\"m\":900,\"t\":2}")
	e, err := DecodeMessage(old)
	if err != nil || e.MemJobsMB != 0 || e.MemHeldMB != 0 || e.Node != "n2" || e.Least != 2 {
		t.Fatalf("an older roam's message: %+v, %v", e, err)
	}
	idle := EncodeMessage(Entry{Node: "n3", Capacity: 1, MemFreeMB: 100})
	if strings.Contains(string(idle), `"j"`) || strings.Contains(string(idle), `"h"`) {
		t.Errorf("a node counting no memory sends %s", idle)
	}
	full := Entry{Node: "n4", Capacity: 0.4, MemFreeMB: 100, MemJobsMB: 768, MemHeldMB: 640}
	if got, err := DecodeMessage(EncodeMessage(full)); err != nil || got != full {
		t.Errorf("round trip of %+v: %+v, %v", full, got, err)
	}
}

// A node whose queue waits for room says so in its entry (and only then:
// an older roam still hears the others); the memory its jobs' requests
// hold changing is news for the nodes that wait, at once, at most once a
// quarter interval, a change held back then news at the next call.
func TestRoomNewsGoesToTheNodesThatWait(t *testing.T) {
	w := Entry{Node: "n2", Capacity: 1, MemJobsMB: 768, MemHeldMB: 640, Waiting: true}
	if got, err := DecodeMessage(EncodeMessage(w)); err != nil || got != w {
		t.Fatalf("round trip of %+v: %+v, %v", w, got, err)
	}
	if b := EncodeMessage(Entry{Node: "n3", Capacity: 1}); strings.Contains(string(b), `"w"`) {
		t.Errorf("a node whose queue waits for nothing sends %s", b)
	}
	entries := []Entry{w, {Node: "n3", Capacity: 1}, {Node: "n4", Capacity: 1, Waiting: true}}
	t0 := time.Unix(1000, 0)
	last, next := 640.0, time.Time{}
	if got := RoomNews(t0, entries, 640, &last, &next, time.Second); got != nil {
		t.Fatalf("no change is no news: %v", got)
	}
	if got := RoomNews(t0, entries, 480, &last, &next, time.Second); !slices.Equal(got, []string{"n2", "n4"}) || last != 480 {
		t.Fatalf("a fall: %v (last %v), want n2 and n4", got, last)
	}
	next = time.Time{}
	if got := RoomNews(t0, entries, 640, &last, &next, time.Second); !slices.Equal(got, []string{"n2", "n4"}) || last != 640 {
		t.Fatalf("a rise: %v (last %v), want n2 and n4", got, last)
	}
	if got := RoomNews(t0.Add(100*time.Millisecond), entries, 480, &last, &next, time.Second); got != nil || last != 640 {
		t.Fatalf("a second fall within a quarter interval: %v (last %v)", got, last)
	}
	if got := RoomNews(t0.Add(300*time.Millisecond), entries, 480, &last, &next, time.Second); !slices.Equal(got, []string{"n2", "n4"}) {
		t.Fatalf("the fall held back, at the next call: %v", got)
	}
}

// ChooseTargets, now drawn by PickTargets on positions (the
// simulator's), draws as it did on names: the reference below is its
// body before, and the agent's sends are unchanged.
func TestChooseTargetsDrawsAsBefore(t *testing.T) {
	before := func(self string, all, recent []string, rng *rand.Rand) []string {
		others := withoutSelf(self, all)
		if len(others) == 0 {
			return nil
		}
		rec := withoutSelf(self, recent)
		rec = slices.DeleteFunc(rec, func(n string) bool { return !slices.Contains(others, n) })
		var first string
		if len(rec) > 0 {
			first = rec[rng.Intn(len(rec))]
		} else {
			first = others[rng.Intn(len(others))]
		}
		if len(others) == 1 {
			return []string{first}
		}
		rest := slices.DeleteFunc(slices.Clone(others), func(n string) bool { return n == first })
		return []string{first, rest[rng.Intn(len(rest))]}
	}
	for seed := int64(0); seed < 500; seed++ {
		r := rand.New(rand.NewSource(seed))
		n := r.Intn(14)
		self := fmt.Sprint(r.Intn(n + 1))
		var all, recent []string
		for i := range n {
			all = append(all, fmt.Sprint(i))
			if r.Intn(3) == 0 {
				recent = append(recent, fmt.Sprint(i+r.Intn(2)))
			}
		}
		got := ChooseTargets(self, all, recent, rand.New(rand.NewSource(seed)))
		if want := before(self, all, recent, rand.New(rand.NewSource(seed))); !slices.Equal(got, want) {
			t.Fatalf("seed %d (self %s, all %v, recent %v): %v, before %v", seed, self, all, recent, got, want)
		}
	}
}
