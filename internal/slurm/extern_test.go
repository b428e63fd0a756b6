package slurm

import "testing"

func TestStepdSocket(t *testing.T) {
	got, err := StepdSocket("n2", "17")
	if err != nil || got != "n2_17.4294967292" {
		t.Errorf("StepdSocket(n2, 17) = %q, %v; want n2_17.4294967292", got, err)
	}
	for _, bad := range [][2]string{{"n2", "../x"}, {"n2", "0"}, {"../n2", "17"}, {"", "17"}, {"n/2", "17"}} {
		if got, err := StepdSocket(bad[0], bad[1]); err == nil {
			t.Errorf("StepdSocket(%q, %q) = %q, want an error", bad[0], bad[1], got)
		}
	}
}

// TestExternTask: the extern step's task group on a node is task_N, N the
// node's index in the job (task_0 on the first node only); another name or
// two tasks is no answer.
func TestExternTask(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"cgroup.procs", "task_2", "notify_on_release"}, "task_2"},
		{[]string{"task_0"}, "task_0"},
		{[]string{"cgroup.procs"}, ""},
		{[]string{"task_1", "task_2"}, ""},
		{[]string{"task_special", "task_x", "task_"}, ""},
		{[]string{"task_1234567890"}, ""},
	} {
		got, ok := ExternTask(c.names)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ExternTask(%v) = %q, %v; want %q", c.names, got, ok, c.want)
		}
	}
}

// TestInStepTask reads the cpuacct line of /proc/PID/cgroup: a step's
// task group counts, the step's own group or another hierarchy's does not.
func TestInStepTask(t *testing.T) {
	for in, want := range map[string]bool{
		"5:cpuacct:/roam/c/n2/slurm_n2/uid_70701/job_7/step_extern/task_1\n4:freezer:/roam/c/n2/slurm_n2/uid_70701/job_7/step_extern\n": true,
		"5:cpu,cpuacct:/slurm/uid_1/job_7/step_batch/task_0\n":                                                                          true,
		"5:cpuacct:/roam/c/n2/slurm_n2/uid_70701/job_7/step_extern\n":                                                                   false,
		"4:freezer:/slurm/uid_1/job_7/step_extern/task_1\n5:cpuacct:/roam/c/n2/jobs/x\n":                                                false,
		"0::/slurm/uid_1/job_7/step_extern/task_1\n":                                                                                    false,
		"": false,
	} {
		if got := InStepTask(in); got != want {
			t.Errorf("InStepTask(%q) = %v, want %v", in, got, want)
		}
	}
}
