package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"roam/internal/emu"
)

// A cluster that fails to come up is taken down again: nothing of it is
// left (no state, bridge or namespace), and the next run may bring it up.
// Its agent here is a program that exits at once.
func TestAClusterThatFailsToComeUpIsTakenDown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes network namespaces and a bridge")
	}
	const name = "bupfail"
	t.Cleanup(func() { _ = emu.Down(name) })
	agent := filepath.Join(t.TempDir(), "roamd")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := emu.Spec{Name: name, Nodes: 2, CPU: []float64{0.1, 0.1}, Subnet: "198.18.121.0/24", Roamd: agent}
	if _, err := up(spec); err == nil {
		t.Fatal("up with an agent that exits at once: no error")
	} else {
		t.Logf("up: %v", err)
	}
	if st, err := emu.Load(name); err == nil {
		t.Fatalf("cluster %s left recorded after its failed start: %+v", name, st)
	}
	for _, c := range []struct {
		cmd  []string
		name string
	}{{[]string{"ip", "netns", "list"}, "roam-" + name + "-"}, {[]string{"ip", "link", "show"}, "rb-" + name}} {
		out, err := exec.Command(c.cmd[0], c.cmd[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v", c.cmd, err)
		}
		if strings.Contains(string(out), c.name) {
			t.Fatalf("%v after the failed start still shows %s:\n%s", c.cmd, c.name, out)
		}
	}
	// Its next start is not refused as half up.
	if _, err := up(spec); err == nil || errors.Is(err, emu.ErrRunning) {
		t.Fatalf("up again: %v; want its agent's failure again, not a cluster in the way", err)
	}
}
