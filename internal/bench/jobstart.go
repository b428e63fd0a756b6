package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// JobStartSpec configures the job-start benchmark.
type JobStartSpec struct {
	Nodes  int
	Jobs   int
	Subnet string
	Roamd  string
}

// JobStartResult compares roam's start rate with a local shell loop's, both
// measured in the same run.
type JobStartResult struct {
	Jobs          int     `json:"jobs"`
	Nodes         int     `json:"nodes"`
	RoamSeconds   float64 `json:"roam_s"`
	RoamPerSec    float64 `json:"roam_jobs_per_s"`
	LocalSeconds  float64 `json:"local_s"`
	LocalPerSec   float64 `json:"local_procs_per_s"`
	Ratio         float64 `json:"ratio"` // roam rate / local rate
	AllFinishedOK bool    `json:"all_finished_ok"`
}

// JobStart times `roam run -d -n JOBS true` on a cluster (until every job
// has been started on its node and the ids are back) next to a shell loop
// that starts the same number of `/bin/true` processes locally.
func JobStart(spec JobStartSpec, progress io.Writer) (JobStartResult, error) {
	name := "bjobs"
	_ = emu.Down(name)
	defer down(name)
	st, err := up(emu.Spec{Name: name, Nodes: spec.Nodes, Subnet: spec.Subnet, Roamd: spec.Roamd})
	if err != nil {
		return JobStartResult{}, err
	}
	cl := api.NewClient(st.Nodes[0].Socket)
	if err := waitMembers(cl, spec.Nodes); err != nil {
		return JobStartResult{}, err
	}
	fmt.Fprintf(progress, "job-start: %d jobs on %d nodes\n", spec.Jobs, spec.Nodes)
	t0 := time.Now()
	var resp api.RunResponse
	err = cl.Do(context.Background(), http.MethodPost, api.PathRun,
		api.RunRequest{Argv: []string{"/bin/true"}, Env: os.Environ(), Cwd: "/", Count: spec.Jobs}, &resp)
	roam := time.Since(t0)
	if err != nil {
		return JobStartResult{}, err
	}
	fmt.Fprintf(progress, "job-start: local shell loop of %d /bin/true\n", spec.Jobs)
	t1 := time.Now()
	loop := exec.Command("sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done", spec.Jobs))
	if err := loop.Run(); err != nil {
		return JobStartResult{}, err
	}
	local := time.Since(t1)

	// Every job must also end well, or the rate means nothing.
	ok := false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var js []api.Job
		if cl.Get(api.PathPS+"?all=1", &js) == nil {
			done := 0
			for _, j := range js {
				if j.State == api.StateFinished && j.ExitCode != nil && *j.ExitCode == 0 {
					done++
				}
			}
			if done == spec.Jobs {
				ok = true
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := JobStartResult{
		Jobs: spec.Jobs, Nodes: spec.Nodes,
		RoamSeconds: roam.Seconds(), RoamPerSec: float64(spec.Jobs) / roam.Seconds(),
		LocalSeconds: local.Seconds(), LocalPerSec: float64(spec.Jobs) / local.Seconds(),
		AllFinishedOK: ok,
	}
	r.Ratio = r.RoamPerSec / r.LocalPerSec
	return r, nil
}

// waitMembers waits until the agent sees n members alive.
func waitMembers(cl *api.Client, n int) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ns []api.NodeInfo
		if cl.Get(api.PathNodes, &ns) == nil && countAlive(ns) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("membership incomplete after 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
