package queue

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const q = 500 * time.Millisecond

// run is a running job of group key on node with cpu of CPU and 160 MiB.
func run(id, key, node string, cpu time.Duration) Run {
	return Run{ID: id, Key: key, Node: node, CPU: cpu, MemMB: 160}
}

func ids(ps []Preemption) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

// preemptIn is a group "s" with short fresh jobs waiting for 160 MiB,
// on nodes 1 and 2 with no room left, and runs.
func preemptIn(short int, runs ...Run) PreemptInput {
	return PreemptInput{After: q, Short: map[string]int{"s": short}, NeedMB: map[string]float64{"s": 160, "t": 160},
		RoomMB: map[string]float64{"1": 0, "2": 100}, Runs: runs}
}

// Every branch of Preempt: which jobs a round preempts, and which it
// never does.
func TestPreempt(t *testing.T) {
	for _, c := range []struct {
		name string
		in   PreemptInput
		want []string
	}{
		{"the job past its quantum, for the fresh one waiting",
			preemptIn(1, run("a", "s", "1", q), run("b", "s", "1", q-1)), []string{"a"}},
		{"no more than wait, the most CPU first, ties to the lower id",
			preemptIn(2, run("d", "s", "2", 3*q), run("c", "s", "1", 3*q), run("a", "s", "1", 9*q), run("b", "s", "1", q)), []string{"a", "c"}},
		{"none when no fresh job of its group waits",
			preemptIn(0, run("a", "s", "1", 9*q)), nil},
		{"never another group's (another user's) job to let this one in",
			preemptIn(1, run("a", "t", "1", 9*q)), nil},
		{"quantum 0: never",
			func() PreemptInput { in := preemptIn(1, run("a", "s", "1", 9*q)); in.After = 0; return in }(), nil},
		{"never twice",
			preemptIn(1, Run{ID: "a", Key: "s", Node: "1", CPU: 9 * q, MemMB: 160, Preempted: true}), nil},
		{"never one that cannot be checkpointed",
			preemptIn(1, Run{ID: "a", Key: "s", Node: "1", CPU: 9 * q, MemMB: 160, Held: "pinned (run --pin)"}), nil},
		{"one under way counts against those waiting",
			preemptIn(1, Run{ID: "a", Key: "s", Node: "1", CPU: 9 * q, MemMB: 160, Preempting: true}, run("b", "s", "1", 9*q)), nil},
		{"one under way, and one more waiting",
			preemptIn(2, Run{ID: "a", Key: "s", Node: "1", CPU: 9 * q, MemMB: 160, Preempting: true}, run("b", "s", "1", 9*q)), []string{"b"}},
		{"not on a node that takes no start (draining, not heard)",
			preemptIn(1, run("a", "s", "3", 9*q)), nil},
		{"not where its room freed is too small for the request waiting",
			func() PreemptInput {
				in := preemptIn(1, Run{ID: "a", Key: "s", Node: "1", CPU: 9 * q, MemMB: 100}, Run{ID: "b", Key: "s", Node: "2", CPU: q, MemMB: 100})
				return in
			}(), []string{"b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(Preempt(c.in)); !slices.Equal(got, c.want) {
				t.Fatalf("preempted %v, want %v", got, c.want)
			}
		})
	}
}

// A group's fresh jobs start before its preempted ones, whatever their
// indices; a preempted job starts as a restore; Short counts the fresh
// jobs left waiting for room, and RoomMB the room each node has left.
func TestDecideFreshBeforePreempted(t *testing.T) {
	g := sweepOf(1001, 10, 6, 160*mb)
	g.Pending[0].Preempted, g.Pending[1].Preempted = true, true
	in := Input{Heard: known, Groups: []Group{g}, Nodes: nodes4(0, 768, 768, 768), Max: RoundMax}
	d := Decide(in, rand.New(rand.NewSource(1)))
	var got []int
	for _, s := range d.Starts {
		got = append(got, s.Index)
		if s.Restore != (s.Index < 2) {
			t.Fatalf("start %+v: Restore is for the preempted jobs only", s)
		}
	}
	if !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("started indices %v, want the fresh 2..5 first", got)
	}
	if d.Short[g.Key] != 0 {
		t.Fatalf("short %v: only preempted jobs wait", d.Short)
	}
	if room := d.RoomMB["1"]; room != 768-4*160 || len(d.RoomMB) != 4 {
		t.Fatalf("room %v", d.RoomMB)
	}
	// One node of room for two: the fresh 2 and 3 start, 4 and 5 wait
	// short, then the preempted ones, which Short does not count.
	in.Nodes = nodes4(768-320, 768, 768, 768)
	d = Decide(in, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 2 || d.Starts[0].Index != 2 || d.Short[g.Key] != 2 || !d.ForRoom {
		t.Fatalf("starts %+v, short %v", d.Starts, d.Short)
	}
	// Under --max-running, only those it lets start count.
	in.Groups[0].MaxRunning, in.Groups[0].Running = 3, 0
	d = Decide(in, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 2 || d.Short[g.Key] != 1 {
		t.Fatalf("max-running 3: starts %+v, short %v", d.Starts, d.Short)
	}
}

// A round with Preempt after it never preempts more of a group than it
// has fresh jobs waiting, nor a job twice, nor one held, nor one short of
// its quantum.
func TestPreemptBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := PreemptInput{After: q, Short: map[string]int{}, NeedMB: map[string]float64{}, RoomMB: map[string]float64{"1": 0, "2": 40}}
		for _, k := range []string{"s", "t"} {
			in.Short[k] = rapid.IntRange(0, 4).Draw(t, "short")
			in.NeedMB[k] = 160
		}
		n := rapid.IntRange(0, 12).Draw(t, "runs")
		for i := range n {
			in.Runs = append(in.Runs, Run{ID: string(rune('a' + i)), Key: rapid.SampledFrom([]string{"s", "t"}).Draw(t, "key"),
				Node: rapid.SampledFrom([]string{"1", "2", "3"}).Draw(t, "node"), CPU: time.Duration(rapid.IntRange(0, 4).Draw(t, "cpu")) * q / 2,
				MemMB: 160, Preempted: rapid.Bool().Draw(t, "preempted"), Preempting: rapid.Bool().Draw(t, "preempting"),
				Held: rapid.SampledFrom([]string{"", "", "pinned"}).Draw(t, "held")})
		}
		per := map[string]int{}
		for _, p := range Preempt(in) {
			per[p.Key]++
			i := slices.IndexFunc(in.Runs, func(r Run) bool { return r.ID == p.ID })
			r := in.Runs[i]
			if r.Preempted || r.Preempting || r.Held != "" || r.CPU < q || r.Node == "3" || r.Key != p.Key {
				t.Fatalf("preempted %+v", r)
			}
		}
		for k, c := range per {
			under := 0
			for _, r := range in.Runs {
				if r.Key == k && r.Preempting {
					under++
				}
			}
			if c+under > in.Short[k] {
				t.Fatalf("group %s: %d preempted, %d under way, %d waiting", k, c, under, in.Short[k])
			}
		}
	})
}
