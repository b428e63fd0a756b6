package bench

import (
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/emu"
	"roam/internal/procfs"
)

// chaosStepLimit bounds a step and the checks after it. A step still
// going after it is a hang (a call an agent never answers): the run stops
// with every agent's goroutines in its log, where a run stopped by hand
// kept no log at all.
const chaosStepLimit = 5 * time.Minute

// watch starts the watch of one step: quit runs once the step has taken
// limit. The function it returns ends the watch and says whether quit ran.
func watch(limit time.Duration, quit func()) (hung func() bool) {
	var fired atomic.Bool
	t := time.AfterFunc(limit, func() {
		fired.Store(true)
		quit()
	})
	return func() bool {
		t.Stop()
		return fired.Load()
	}
}

// quitAgents sends SIGQUIT to every live agent of cluster name: Go's
// runtime writes each goroutine's stack to the agent's log and ends it.
func quitAgents(name string) {
	st, err := emu.Status(name)
	if err != nil {
		return
	}
	var quit []int
	for _, n := range st.Nodes {
		if n.State == "up" && n.PID > 0 && syscall.Kill(n.PID, syscall.SIGQUIT) == nil {
			quit = append(quit, n.PID)
		}
	}
	// Their logs are copied next: each has written its stacks once it
	// has exited (a few seconds at most; a zombie counts as exited).
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range quit {
		for time.Now().Before(deadline) && procfs.Running(pid) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}
