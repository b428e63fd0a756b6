package queue

import (
	"math/rand"
	"strings"
	"testing"

	"roam/internal/cpufeat"
)

// A preempted job is restored only on a node whose CPU has every feature
// of the one its program started on: while none is alive it waits and
// says why, a fresh job of its group going anywhere first; room on an
// older node alone leaves it waiting; room on a fitting node takes it.
func TestDecideRestoresOnlyWhereTheCPUFits(t *testing.T) {
	newer := cpufeat.FromFlags(cpufeat.X86, []string{"sse2", "avx2", "avx512f"})
	older := cpufeat.FromFlags(cpufeat.X86, []string{"sse2", "avx2"})
	g := sweepOf(1001, 10, 2, 160*mb)
	g.Pending[1].Preempted, g.Pending[1].CPU = true, newer
	ns := nodes4(0, 700, 700, 700) // room on node 1 alone
	for i := range ns {
		ns[i].CPU = older
	}
	round := func() Decision {
		return Decide(Input{Heard: known, Groups: []Group{g}, Nodes: ns, Max: RoundMax}, rand.New(rand.NewSource(1)))
	}
	d := round()
	if len(d.Starts) != 1 || d.Starts[0].Index != 0 || d.Starts[0].Node != "1" {
		t.Fatalf("starts %+v: want the fresh job on node 1, and no restore", d.Starts)
	}
	if why := d.Why[g.Key]; !strings.Contains(why, "avx512f") {
		t.Fatalf("why %q: want the CPU named", why)
	}
	g.Pending = g.Pending[1:]
	ns[1].CPU = newer // AVX-512, without room
	if d := round(); len(d.Starts) != 0 {
		t.Fatalf("starts %+v: the restore went where its CPU does not fit", d.Starts)
	}
	ns[1].MemHeldMB = 0
	if d := round(); len(d.Starts) != 1 || d.Starts[0].Node != "2" || !d.Starts[0].Restore {
		t.Fatalf("starts %+v: want the restore on node 2", d.Starts)
	}
}
