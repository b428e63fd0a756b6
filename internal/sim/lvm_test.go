package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"roam/internal/load"
)

// lvmCase is a small fan-out whose vectors overflow: 32 nodes, vectors
// of 8, 16 jobs started on node 0.
func lvmCase(pol load.Policy) (Config, Fanout) {
	c := DefaultConfig()
	c.Nodes, c.Seed, c.Policy, c.VectorPolicy = 32, 1, "balance", pol
	return c, Fanout{Warmup: 10 * time.Second, Jobs: 16, Work: 60}
}

// The simulator runs the vector policy it is given: once the vectors
// overflow, beneficial refuses entries fifo takes, and the two hold
// other entries on the same seed.
func TestVectorPolicyMatters(t *testing.T) {
	held := map[load.Policy][][]string{}
	for _, pol := range load.Policies {
		c, f := lvmCase(pol)
		r, err := newFanout(c, f)
		if err != nil {
			t.Fatal(err)
		}
		res := r.run()
		if res.Full == 0 || res.Makespan < f.Work || res.Migrations < 1 {
			t.Fatalf("%s: a run whose vectors never overflowed or whose jobs never spread: %+v", pol, res)
		}
		if pol == load.PolicyFIFO && res.Discarded != 0 || pol == load.PolicyBeneficial && res.Discarded == 0 {
			t.Fatalf("%s discarded %d of %d entries that came to a full vector: fifo discards none, beneficial some", pol, res.Discarded, res.Full)
		}
		for i := range r.s.nodes {
			var ids []string
			for e := range r.s.nodes[i].vec.All() {
				ids = append(ids, e.Node)
			}
			slices.Sort(ids)
			held[pol] = append(held[pol], ids)
		}
	}
	same := 0
	for i := range held[load.PolicyFIFO] {
		if slices.Equal(held[load.PolicyFIFO][i], held[load.PolicyBeneficial][i]) {
			same++
		}
	}
	if same == len(held[load.PolicyFIFO]) {
		t.Fatalf("every node's vector held the same nodes under fifo and beneficial")
	}
}

// A fan-out is a function of its Config; it balances (every node within
// one job of its share) before it ends, and the report carries each
// point with the ratio's interval.
func TestLVMReport(t *testing.T) {
	c, f := lvmCase(load.PolicyFIFO)
	spec := LVMSpec{Nodes: []int{16}, Jobs: []JobCount{{Fixed: 8}, {PerNode: 0.5}}, Seeds: 3, Base: c, Work: 30, Warmup: f.Warmup}
	a, err := RunLVM(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunLVM(spec, nil)
	if string(LVMJSON(a)) != string(LVMJSON(b)) || string(LVMReport(spec, a)) != string(LVMReport(spec, b)) {
		t.Fatal("two runs of one spec differ")
	}
	for _, p := range a {
		for _, r := range append(p.Fifo, p.Beneficial...) {
			if r.Never || r.Balanced <= 0 || r.Balanced > r.FirstEnd {
				t.Fatalf("%d jobs on 16 nodes not balanced before the first end: %+v", r.Jobs, r)
			}
		}
	}
	rep := string(LVMReport(spec, a))
	for _, want := range []string{"| 16 | 8 |", "| 16 | n/2 |", "0/0"} {
		if !strings.Contains(rep, want) {
			t.Fatalf("report lacks %q:\n%s", want, rep)
		}
	}
	t.Logf("\n%s", rep)
}

func TestParseJobCount(t *testing.T) {
	for s, want := range map[string]int{"8": 8, "n": 64, "n/2": 32, "2n": 128} {
		j, err := ParseJobCount(s)
		if err != nil || j.Of(64) != want || j.String() != s {
			t.Errorf("ParseJobCount(%q) = %+v, %v: %d jobs on 64 nodes, %q; want %d", s, j, err, j.Of(64), j, want)
		}
	}
	for _, s := range []string{"", "0", "n/0", "xn", "-3"} {
		if _, err := ParseJobCount(s); err == nil {
			t.Errorf("ParseJobCount(%q) took it", s)
		}
	}
}
