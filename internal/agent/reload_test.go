package agent

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
)

// roamd's SIGHUP: a changed scheduler runs at once while the node runs
// its config's policy; once a policy was loaded (roam policy load), the
// config's does not replace it, and the reload says so. Every other
// changed key is named as needing a restart and changes nothing.
func TestReloadTakesTheSchedulerAndNamesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 31, faults{}, "static")
		a := c.nodes[0].a
		cfg := a.cfg
		cfg.Scheduler, cfg.PeerPort = "balance", a.cfg.PeerPort+100
		took, restart := a.Reload(cfg)
		if !slices.Equal(took, []string{"scheduler"}) || !slices.Equal(restart, []string{"peer_port"}) {
			t.Fatalf("took %v, needs a restart %v", took, restart)
		}
		if p := a.sched.Policy(); p.Name != "balance" {
			t.Fatalf("running %s after the reload, want balance", p.Name)
		}
		if a.cfg.PeerPort == cfg.PeerPort {
			t.Fatal("the peer port changed without a restart")
		}
		if _, err := a.sched.LoadPolicy(Caller{}, api.PolicyRequest{Name: "mosix"}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("mosix loaded here", time.Minute, func() bool { return a.sched.Policy().Name == "mosix" })
		cfg.Scheduler = "threshold"
		took, restart = a.Reload(cfg)
		if len(took) != 0 || len(restart) != 2 || restart[0] != "peer_port" || !strings.Contains(restart[1], "roam policy load") {
			t.Fatalf("after a load: took %v, needs a restart %v", took, restart)
		}
		if p := a.sched.Policy(); p.Name != "mosix" {
			t.Fatalf("running %s, want the loaded mosix", p.Name)
		}
	})
}
