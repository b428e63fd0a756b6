package emu

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// What an agent started is found before the agent ends and killed after:
// a child that outlives its parent (reparented away) is still killed, and
// nothing else is.
func TestAgentsStartedOutliveThemAndAreKilled(t *testing.T) {
	// The "agent": a shell whose child sleeps on after the shell is killed.
	agent := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid: %q", buf[:n])
	}
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(child, syscall.SIGKILL)
		_ = bystander.Process.Kill()
		_ = bystander.Wait()
	})

	theirs := agentsStarted([]int{agent.Process.Pid})
	if got := stillRunning(theirs); !slices.Contains(got, child) || slices.Contains(got, bystander.Process.Pid) || slices.Contains(got, agent.Process.Pid) {
		t.Fatalf("the agent's started processes: %v, want its child %d only", got, child)
	}
	_ = agent.Process.Kill()
	_ = agent.Wait()
	if got := stillRunning(theirs); !slices.Contains(got, child) {
		t.Fatalf("the child %d should outlive the agent: %v", child, got)
	}
	killUntilGone(func() []int { return stillRunning(theirs) })
	if got := stillRunning(theirs); len(got) != 0 {
		t.Fatalf("left running: %v", got)
	}
	if err := syscall.Kill(bystander.Process.Pid, 0); err != nil {
		t.Fatalf("the bystander was killed: %v", err)
	}
}
