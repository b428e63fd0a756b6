package agent

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// Jobs run with --checkpoint-every on a node that is cut off from the
// others are restarted by their home from their newest checkpoint, on
// another node, within three times the failure detection; the home's
// output is cut back to the checkpoint's. When the node's link comes
// back with the old copies still running, those are ended, and nothing
// they wrote or their exit reaches the home.
func TestAgentsRestartTheJobsOfADeadNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 30, faults{}, "static")
		home, n2 := c.nodes[0].a, c.nodes[1]
		resp, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 2, On: "n2", CheckpointEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ids := resp.IDs
		for _, id := range ids {
			c.say(1, id, id+" before")
		}
		c.waitFor("a checkpoint of each kept at the home", time.Minute, func() bool {
			for _, id := range ids {
				r := c.homeRec(id)
				if r.Newest == nil || r.Newest.Out != int64(len(id+" before\n")) || c.homeOutput(id) != id+" before\n" {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			if r := c.homeRec(id); r.Newest.StoredOn != "n1" || home.keeper.Stored(id) == "" {
				t.Fatalf("%s: newest checkpoint %+v; kept at the home: %q", id, r.Newest, home.keeper.Stored(id))
			}
			c.say(1, id, id+" after the checkpoint")
		}
		c.waitFor("output after the checkpoint at home", time.Minute, func() bool {
			return strings.HasSuffix(c.homeOutput(ids[1]), "after the checkpoint\n")
		})
		// n2 is cut off and goes on running its copies.
		c.world.mu.Lock()
		c.world.cutOff["n2"] = true
		c.world.mu.Unlock()
		cut := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		detect := c.waitDead(home, "n2").Sub(cut)
		c.waitFor("the jobs restarted elsewhere", time.Minute, func() bool {
			for _, id := range ids {
				r := c.homeRec(id)
				run, _ := c.world.copies(id)
				if r.Inc != 1 || r.State != job.StateRunning || r.Node == "n2" || len(run) != 2 {
					return false
				}
			}
			return true
		})
		took := time.Since(cut)
		if took > 3*detect {
			t.Fatalf("restarted %v after the cut; failure detection took %v", took, detect)
		}
		for _, id := range ids {
			r := c.homeRec(id)
			if len(r.Restarts) != 1 || r.Restarts[0].Out != int64(len(id+" before\n")) || !strings.Contains(r.Restarts[0].Why, "n2 was declared dead") {
				t.Fatalf("%s: restarts %+v", id, r.Restarts)
			}
			// Cut back to the checkpoint's offset: what came after it comes
			// again from the restored copy, if it writes it again.
			if got := c.homeOutput(id); got != id+" before\n" {
				t.Fatalf("%s: home output %q after the restart", id, got)
			}
		}
		t.Logf("failure detection %v; restarted %v after the cut", detect, took)

		// The old copies write, then the link comes back.
		for _, id := range ids {
			c.say(1, id, id+" from the old copy")
		}
		c.net.heal()
		c.waitFor("the old copies ended", 2*time.Minute, func() bool {
			for _, id := range ids {
				run, _ := c.world.copies(id)
				_, still := n2.a.jobs.LocalRec(id)
				if len(run) != 1 || run[0] == "n2" || still {
					return false
				}
			}
			return true
		})
		c.world.mu.Lock()
		delete(c.world.cutOff, "n2")
		c.world.mu.Unlock()
		time.Sleep(10 * time.Second)
		for _, id := range ids {
			r := c.homeRec(id)
			run, _ := c.world.copies(id)
			if r.State != job.StateRunning || r.Inc != 1 || len(run) != 1 || run[0] != r.Node || strings.Contains(c.homeOutput(id), "old copy") {
				t.Fatalf("%s: record %s on %s inc %d, runs on %v, output %q", id, r.State, r.Node, r.Inc, run, c.homeOutput(id))
			}
		}
	})
}
