package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// ---- checkpoint ----

var expCheckpoint = &Experiment{
	Name:  "checkpoint",
	Title: "Checkpoints: freeze time and size vs the process's size, and the slowdown of periodic checkpoints",
	Seed:  "seed 004 (Kerrighed's checkpoint/restart) and the checkpoint issue's benchmark",
	About: "Part 1: `roam checkpoint` of a process of a given resident size running on node 2, read back whole: how long the job was frozen and the file's size. Part 2: four runs of the same CPU-bound job (burn) side by side, each on a node of its own with the same CPU share: one unbroken, and one each with --checkpoint-every 10 s, 60 s and 600 s (each checkpoint sent to another node to keep); slowdown = run time / the unbroken run's, in the same run.",
	run: func(x *Run) error {
		sizes := pick(x, []int{16}, []int{16, 128, 1024})
		everies := pick(x, []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}, []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute})
		// Long enough that the longest interval checkpoints it once.
		wall := pick(x, 15.0, 660.0)
		cpu := 0.4
		r := x.Res
		r.XLabel = "RSS (MiB) / checkpoint interval (s)"
		r.Setup = fmt.Sprintf("4 nodes of %.1f CPU; part 2: burn of %.0f CPU-seconds (about %.0f s), all four runs at once; images on tmpfs, checkpoint files on the state directory's disk.", cpu, wall*cpu, wall)
		r.Charts = []Chart{
			{File: "checkpoint-freeze.png", Title: "Freeze time of a checkpoint vs process size", Metric: "freeze", XLabel: "RSS (MiB)", YLabel: "freeze (ms)"},
			{File: "checkpoint-slowdown.png", Title: "Run time with periodic checkpoints / unbroken", Metric: "slowdown", XLabel: "checkpoint interval (s)", YLabel: "slowdown (ratio)"},
		}
		x.plan(len(sizes)*x.Reps + x.Reps)
		return withCluster(x, emu.Spec{Name: "bckpt", Nodes: 4, CPU: []float64{cpu}, Subnet: "198.18.116.0/24", Scheduler: "static"}, func(st emu.State, cl *api.Client) error {
			for _, size := range sizes {
				for rep := 1; rep <= x.Reps; rep++ {
					x.step("checkpoint of a %d MiB process, repetition %d", size, rep)
					c, err := checkpointOnce(cl, x.tool("migjob"), size)
					if err != nil {
						return fmt.Errorf("%d MiB: %w", size, err)
					}
					r.Add("checkpoint", float64(size), "freeze", "ms", c.FreezeMS)
					r.Add("checkpoint", float64(size), "size", "MiB", float64(c.Bytes)/(1<<20))
				}
			}
			secs := strconv.FormatFloat(wall*cpu, 'f', 1, 64)
			for rep := 1; rep <= x.Reps; rep++ {
				x.step("burn %s CPU-s unbroken and checkpointed every %v, repetition %d", secs, everies, rep)
				var ids []string
				for i, every := range append([]time.Duration{0}, everies...) {
					id, err := start(cl, api.RunRequest{Argv: []string{x.tool("burn"), secs, "0"}, On: strconv.Itoa(i + 1), CheckpointEvery: every})
					if err != nil {
						return err
					}
					ids = append(ids, id...)
				}
				js, err := waitJobs(cl, ids, time.Duration(3*wall)*time.Second+5*time.Minute)
				if err != nil {
					return err
				}
				base := js[0].Ended.Sub(js[0].Started).Seconds()
				for i, j := range js {
					if j.ExitCode == nil || *j.ExitCode != 0 {
						return fmt.Errorf("job %s ended %v", j.ID, j.ExitCode)
					}
					if i == 0 {
						continue
					}
					every := everies[i-1].Seconds()
					t := j.Ended.Sub(j.Started).Seconds()
					r.Add("checkpointed", every, "slowdown", "", t/base)
					n, freeze := 0, 0.0
					for _, c := range j.Checkpoints {
						if c.OK && c.StoredOn != "" {
							n++
							freeze += c.FreezeMS
						}
					}
					r.Add("checkpointed", every, "checkpoints", "", float64(n))
					if n > 0 {
						r.Add("checkpointed", every, "freeze", "ms", freeze/float64(n))
					}
				}
				r.Add("unbroken", 0, "run time", "s", base)
			}
			for _, every := range everies {
				if m := r.Get("checkpointed", every.Seconds(), "checkpoints"); m == nil || m.Mean < 1 {
					r.Check("every interval checkpointed its job at least once", false, "every %v: no checkpoint kept", every)
					return nil
				}
			}
			r.Check("every interval checkpointed its job at least once", true, "")
			return nil
		})
	},
}

// checkpointOnce starts a process of size MiB on node 2, checkpoints it
// once, reads the file back whole, and returns its record's checkpoint.
func checkpointOnce(cl *api.Client, migjob string, size int) (api.Checkpoint, error) {
	ids, err := start(cl, api.RunRequest{Argv: []string{migjob, "mem", "1000000", "bench", strconv.Itoa(size)}, On: "2"})
	if err != nil {
		return api.Checkpoint{}, err
	}
	defer kill(cl, ids)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var o api.Output
		if err := cl.Get(api.Fill(api.PathJobOutput, ids[0])+"?wait=1s", &o); err == nil && len(o.Stdout) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return api.Checkpoint{}, fmt.Errorf("job %s printed nothing in 2 minutes", ids[0])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := cl.Fetch(ctx, api.PathCheckpoint, api.CheckpointRequest{ID: ids[0]}, io.Discard)
	if err != nil {
		return api.Checkpoint{}, err
	}
	var js []api.Job
	if err := cl.Get(api.PathPS+"?all=1", &js); err != nil {
		return api.Checkpoint{}, err
	}
	for _, j := range js {
		if j.ID == ids[0] && len(j.Checkpoints) > 0 {
			c := j.Checkpoints[len(j.Checkpoints)-1]
			if c.Bytes != n {
				return c, fmt.Errorf("the record says %d bytes, %d were read", c.Bytes, n)
			}
			return c, nil
		}
	}
	return api.Checkpoint{}, fmt.Errorf("job %s: no checkpoint in its record", ids[0])
}
