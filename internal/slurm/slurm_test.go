package slurm

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for in, want := range map[string][]string{
		"n1":                {"n1"},
		"n[1-3]":            {"n1", "n2", "n3"},
		"n[1-2,5],login":    {"n1", "n2", "n5", "login"},
		"c[08-10]x,d[1,3]":  {"c08x", "c09x", "c10x", "d1", "d3"},
		"rack1-n[1-2],gpu9": {"rack1-n1", "rack1-n2", "gpu9"},
	} {
		got, err := ExpandHostlist(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ExpandHostlist(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"n[1-", "n[3-1]", "n[a-b]", "n]1[", "n[1-2][3]", ",", "n[0-99999999]"} {
		if got, err := ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = %v, want an error", bad, got)
		}
	}
}

// TestParseShowJob reads what Debian's scontrol 22.05 printed for a job on
// three nodes of an emulated cluster.
func TestParseShowJob(t *testing.T) {
	b, err := os.ReadFile("testdata/show-job-running.txt")
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseShowJob(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "1" || j.UID != 0 || j.State != "RUNNING" || !reflect.DeepEqual(j.Nodes, []string{"n1", "n2", "n3"}) {
		t.Errorf("parsed %+v", j)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if j.Alloc[n] != (NodeAlloc{CPUs: 1, MemMB: 1024}) {
			t.Errorf("node %s holds %+v, want 1 CPU and 1024 MB", n, j.Alloc[n])
		}
	}
	if j.Name() != "1" {
		t.Errorf("a job outside any array is named %q, want its id", j.Name())
	}
	if j.Has("n4") {
		t.Error("n4 is not the job's")
	}
	arr := "JobId=3 ArrayJobId=1 ArrayTaskId=2 UserId=u(5) JobState=RUNNING NodeList=n2\nJobId=1 ArrayJobId=1 ArrayTaskId=3 UserId=u(5) JobState=RUNNING NodeList=n4\n"
	if j, err := FindJob(arr, "1"); err != nil || j.ID != "1" || j.Name() != "1_3" || !reflect.DeepEqual(j.Nodes, []string{"n4"}) {
		t.Errorf("FindJob of an array's own id: %+v, %v", j, err)
	}
	if _, err := FindJob(arr, "2"); err == nil || !errors.Is(err, ErrRefused) {
		t.Errorf("FindJob of a job not in the output: %v", err)
	}
	spaced, err := ParseShowJob("JobId=7 JobName=a b c UserId=me(70701) JobState=PENDING NodeList=(null) Command=/x y")
	if err != nil || spaced.UID != 70701 || spaced.State != "PENDING" || spaced.Nodes != nil {
		t.Errorf("a job name with spaces: %+v, %v", spaced, err)
	}
	for _, bad := range []string{"", "JobId=1 UserId=root JobState=RUNNING", "JobId=1 UserId=x(0) JobState=RUNNING NodeList=n[", "JobId=1 UserId=x(-2) JobState=RUNNING"} {
		if _, err := ParseShowJob(bad); err == nil {
			t.Errorf("ParseShowJob(%q) took it", bad)
		}
	}
}

func TestJobOfCgroup(t *testing.T) {
	v1 := "6:freezer:/roam/slurm/n2/slurm_n2/uid_70701/job_12/step_extern\n4:memory:/x\n1:cpu:/roam/slurm/n2\n0::/\n"
	if uid, job, ok := JobOfCgroup(v1); !ok || uid != 70701 || job != "12" {
		t.Errorf("v1: %d %q %v", uid, job, ok)
	}
	v2 := "0::/system.slice/slurmstepd.scope/job_9/step_0/user/task_0\n"
	if _, _, ok := JobOfCgroup(v2); ok {
		t.Error("a v2 path without uid_ is no job of a known user")
	}
	v2u := "0::/slurm/uid_5/job_9/step_0\n"
	if uid, job, ok := JobOfCgroup(v2u); !ok || uid != 5 || job != "9" {
		t.Errorf("v2: %d %q %v", uid, job, ok)
	}
	// A memory group of a job does not count: the freezer's is the one
	// Slurm's proctrack keeps the job's processes in.
	if _, _, ok := JobOfCgroup("4:memory:/slurm/uid_1/job_2\n6:freezer:/user.slice\n"); ok {
		t.Error("took a memory group for the job's")
	}
}

// TestCheckRefusesWhatIsNotTheCallers covers each way a caller may claim a
// job: each refusal names SLURM_JOB_ID and says why in one line.
func TestCheckRefusesWhatIsNotTheCallers(t *testing.T) {
	j := Job{ID: "12", UID: 70701, State: "RUNNING", Nodes: []string{"n1", "n2", "n3"}}
	if err := Check(j, 70701, "12", "n2"); err != nil {
		t.Fatalf("the caller's own running job on its node: %v", err)
	}
	done := j
	done.State = "COMPLETING"
	for name, c := range map[string]struct {
		j         Job
		uid       int
		job, node string
		want      string
	}{
		"outside any job":      {j, 70701, "", "n2", "runs in no Slurm job"},
		"in another job":       {j, 70701, "13", "n2", "runs in Slurm job 13"},
		"another user's job":   {j, 70702, "12", "n2", "is not the caller's"},
		"a job that ended":     {done, 70701, "12", "n2", "is COMPLETING, not RUNNING"},
		"a node not the job's": {j, 70701, "12", "n4", "has no node n4"},
	} {
		err := Check(c.j, c.uid, c.job, c.node)
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "SLURM_JOB_ID") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming SLURM_JOB_ID with %q", name, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "12a", "-1", "12345678901", "1_2", "1 2"} {
		if err := ValidJobID(bad); err == nil {
			t.Errorf("ValidJobID(%q) took it", bad)
		}
	}
	if got := ExternDir("/sys/fs/cgroup/freezer/slurm", 70701, "12"); got != "/sys/fs/cgroup/freezer/slurm/uid_70701/job_12/step_extern" {
		t.Errorf("ExternDir = %s", got)
	}
}
