package agent

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/cpufeat/cpufeattest"
	"roam/internal/job"
)

// Nodes say their CPUs, kernels and CRIUs (roam nodes shows them); a job
// started on the AVX-512 node n1 is refused by hand to the Haswell n2,
// on one line naming what n2 lacks, before anything froze; it moves to
// n3, AVX-512 too, and from there is still refused to n2 (its image keeps
// the features of the CPU it started on); a job started on n2 moves to
// n1. A restart from the first job's checkpoint never goes to n2.
func TestAgentsMoveAJobOnlyWhereItsCPUFits(t *testing.T) {
	older, newer := cpufeattest.TwoGenerations(t)
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]cpufeat.Host{
			"n1": {CPU: newer, Model: "Sapphire Rapids", Kernel: "6.1.0-27-amd64", CRIU: "4.1.0"},
			"n2": {CPU: older, Model: "Haswell", Kernel: "5.10.0-30-amd64", CRIU: "3.17.1"},
			"n3": {CPU: newer, Model: "Sapphire Rapids", Kernel: "6.1.0-27-amd64", CRIU: "4.1.0"},
		}
		c := newClusterOf(t, 3, 45, faults{}, "static", parts{hosts: hosts})
		c.waitFor("every node's CPU heard everywhere", time.Minute, func() bool {
			for _, h := range c.nodes {
				for _, n := range h.a.Nodes() {
					if n.CPUFeatures == "" {
						return false
					}
				}
			}
			return true
		})
		for _, n := range c.nodes[0].a.Nodes() {
			want := hosts[n.ID]
			if n.Kernel != want.Kernel || n.CRIU != want.CRIU || n.CPUModel != want.Model || n.CPU != want.CPU.Summary() || n.CPUFeatures != want.CPU.String() {
				t.Fatalf("roam nodes shows %s as %+v, want %+v", n.ID, n, want)
			}
		}
		owner := Caller{UID: 1001, GID: 1001}
		id := runOneOn(t, c, owner, "n1")
		dumps := func() int {
			c.world.mu.Lock()
			defer c.world.mu.Unlock()
			return c.world.counts["dump"]
		}
		before := dumps()
		refused := func(id, from string) {
			t.Helper()
			m, err := c.nodes[0].a.out.Migrate(owner, api.MigrateRequest{ID: id, Node: "n2"})
			if err == nil || m.OK || !strings.Contains(err.Error(), "node n2's CPU lacks") || !strings.Contains(err.Error(), "avx512f") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("migrate %s to n2: %+v %v; want refused, naming avx512f", id, m, err)
			}
			if run, frz := c.world.copies(id); len(run) != 1 || run[0] != from || len(frz) != 0 || dumps() != before {
				t.Fatalf("after the refusal: running on %v, frozen on %v, %d dumps", run, frz, dumps()-before)
			}
		}
		refused(id, "n1")
		if m, err := c.nodes[0].a.out.Migrate(owner, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate to n3: %+v %v", m, err)
		}
		c.waitFor("the job on n3", time.Minute, func() bool { run, _ := c.world.copies(id); return len(run) == 1 && run[0] == "n3" })
		before = dumps()
		refused(id, "n3")
		other := runOneOn(t, c, owner, "n2")
		if m, err := c.nodes[0].a.out.Migrate(owner, api.MigrateRequest{ID: other, Node: "n1"}); err != nil || !m.OK {
			t.Fatalf("a job started on the Haswell, to n1: %+v %v", m, err)
		}

		// Its checkpoint keeps the features: `roam restart --on n2` is
		// refused, naming them, and a restart placed by roam goes to an
		// AVX-512 node, though n2 is as idle as any.
		file := checkpointOf(t, c, owner, id)
		if res, err := c.nodes[0].a.control.Kill(owner, api.KillRequest{IDs: []string{id}, Signal: 9}); err != nil || len(res) != 1 || res[0].Error != "" {
			t.Fatalf("kill: %+v %v", res, err)
		}
		c.waitFor("the job ended", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		_, err := c.nodes[0].a.checkpoints.Restart(owner, url.Values{"on": {"n2"}}, bytes.NewReader(file), int64(len(file)))
		if err == nil || !strings.Contains(err.Error(), "node n2's CPU lacks") || !strings.Contains(err.Error(), "avx512f") {
			t.Fatalf("restart --on n2: %v", err)
		}
		res, err := c.nodes[0].a.checkpoints.Restart(owner, nil, bytes.NewReader(file), int64(len(file)))
		if err != nil || (res.Node != "n1" && res.Node != "n3") {
			t.Fatalf("restart placed by roam: %+v %v; want on n1 or n3", res, err)
		}
		c.waitFor("the restarted job running", time.Minute, func() bool { run, _ := c.world.copies(id); return len(run) == 1 && run[0] == res.Node })
		before = dumps()
		refused(id, res.Node)
	})
}
