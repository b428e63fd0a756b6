package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/bench"
	"roam/internal/emu"
)

// The chaos run's short version (roam bench chaos; internal/bench/chaos.go
// says what it does and checks): 4 real agents, a user's jobs that check
// their own state and append numbered lines to shared files, and a
// schedule drawn from a seed of at least 100 migrations, checkpoint/restart
// cycles and two faults of each kind (an agent SIGKILLed and started
// again, a link cut and healed, a state directory filled, CRIU killed
// mid-dump), every invariant checked after every step: no job lost, none
// run twice, every record where its job runs, every agent's memory and
// descriptors bounded. ROAM_CHAOS_SEED replays a seed. Its link cuts
// stay under the fence's lease (ShortCuts): a long one takes 20 s or
// more, and make bench-chaos has them.
func TestChaosShort(t *testing.T) {
	seed := time.Now().UnixNano() % 1_000_000_000
	if s := os.Getenv("ROAM_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("ROAM_CHAOS_SEED: %v", err)
		}
	}
	spec := bench.ChaosSpec{Name: "chaosq", Subnet: "198.18.89.0/24", Roamd: filepath.Join(binDir, "roamd"), Seed: seed,
		Migrations: 100, Cycles: 6, Faults: 8, Jobs: 4, Lines: 120, StateMB: bench.ChaosStateMB,
		MaxRSSMB: bench.ChaosMaxRSSMB, MaxFDs: bench.ChaosMaxFDs, ShortCuts: true}
	var progress bytes.Buffer
	res, err := bench.Chaos(spec, &progress)
	if left := emu.Leftovers(spec.Name); len(left) > 0 {
		t.Errorf("the chaos run left %v", left)
	}
	if err != nil {
		out := progress.String()
		t.Fatalf("%v\n%s\nthe run's last steps:\n%s", err, res, out[max(0, len(out)-6000):])
	}
	t.Logf("%s", res)
	if res.Migrations < spec.Migrations || res.Cycles < spec.Cycles || res.Lost != 0 || res.RunTwice != 0 {
		t.Fatalf("the counts: %s", res)
	}
	for _, k := range []string{"agent-kill", "link-cut", "disk-full", "criu-kill"} {
		if res.Faults[k] < 2 {
			t.Errorf("%d faults of kind %s, want 2", res.Faults[k], k)
		}
	}
	if !strings.Contains(progress.String(), "seed "+strconv.FormatInt(seed, 10)) {
		t.Errorf("the run does not print its seed")
	}
}
