package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/emu"
	"roam/internal/slurm"
)

// guideBlocks are the code blocks of a doc marked `<!-- guide: NAME -->`
// on the line before their fence, by name: what a test of the doc runs,
// so that the doc and the test cannot drift apart.
func guideBlocks(t *testing.T, doc string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile("(?m)^<!-- guide: ([a-z]+) -->\n```[a-z]*\n")
	out := map[string]string{}
	for _, m := range marker.FindAllSubmatchIndex(b, -1) {
		body := b[m[1]:]
		end := bytes.Index(body, []byte("\n```\n"))
		if end < 0 {
			t.Fatalf("%s: the block marked %q has no end", doc, b[m[2]:m[3]])
		}
		out[string(b[m[2]:m[3]])] = string(body[:end+1])
	}
	return out
}

// TestSlurmGuide follows docs/slurm.md's guide to the emulated cluster
// with Slurm: its blocks marked `guide` run as written, the root's in the
// repository, the user's as the job user in a directory of the user's,
// changed only in the cluster's name, subnet and the repository's path
// (each change must find its text, or the doc moved on without the
// test). It checks what their comments promise: sinfo's 4 idle nodes, the
// array's 4 tasks one on each node, the user's 12 jobs done, sacct's line
// of the job COMPLETED on 3 nodes with the CPU time they used, and down
// leaving nothing. It takes some 5 minutes (make deps and make build, a
// cluster up, and a sweep long enough that Slurm's whole seconds of CPU
// a node stay within 5 % of it): make test-long runs it.
func TestSlurmGuide(t *testing.T) {
	long(t)
	needSlurm(t)
	const name, subnet = "sguide", 96
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := guideBlocks(t, filepath.Join(repo, "docs", "slurm.md"))
	for _, b := range []string{"root", "user", "down"} {
		if blocks[b] == "" {
			t.Fatalf("docs/slurm.md has no block marked guide: %s", b)
		}
	}
	for _, s := range []struct{ block, old, new string }{
		{"root", "--subnet 198.18.91.0/24", fmt.Sprintf("--subnet 198.18.%d.0/24", subnet)},
		{"root", "/clusters/roam/", "/clusters/" + name + "/"},
		{"user", "/clusters/roam/", "/clusters/" + name + "/"},
		{"user", "ROAM_CLUSTER=roam ", "ROAM_CLUSTER=" + name + " "},
		{"user", "/path/to/roam", repo},
	} {
		if !strings.Contains(blocks[s.block], s.old) {
			t.Fatalf("docs/slurm.md's %s block has no %q: change the test with the doc", s.block, s.old)
		}
		blocks[s.block] = strings.ReplaceAll(blocks[s.block], s.old, s.new)
	}
	guide := func(block, dir string, o owner) string {
		t.Helper()
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", blocks[block])
		cmd.Dir = dir
		// The root's shell names the cluster as `--cluster` would; the
		// user's starts with nothing of root's.
		cmd.Env = append(os.Environ(), "ROAM_CLUSTER="+name)
		if o.uid != 0 {
			cmd.Env = []string{"HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin", "USER=" + o.name}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: o.groups}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docs/slurm.md's %s block: %v\n%s", block, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(repo, "bin", "roam"), "--cluster", name, "cluster", "down")
		_ = cmd.Run()
	})

	out := strings.Join(strings.Fields(guide("root", repo, owner{})), " ")
	for _, want := range []string{"slurm: export SLURM_CONF=" + emu.SlurmConf(name), "main* up infinite 4 idle n[1-4]", "Submitted batch job", "JOBID PARTITION"} {
		if !strings.Contains(out, want) {
			t.Errorf("the root's block printed no %q:\n%s", want, out)
		}
	}
	array := regexp.MustCompile(`Submitted batch job ([0-9]+)`).FindStringSubmatch(out)
	if array == nil {
		t.Fatalf("sbatch printed no job id:\n%s", out)
	}
	c := &cluster{t: t, name: name}
	waitFor(t, 60*time.Second, "the array's 4 tasks ended, one on each node", func() (bool, string) {
		out, err := c.slurmCmd(owner{}, "sacct", "-j", array[1], "-X", "-n", "-P", "-o", "JobID,NodeList,State").CombinedOutput()
		nodes := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Split(l, "|"); len(f) == 3 && f[2] == "COMPLETED" {
				nodes[f[1]] = true
			}
		}
		return err == nil && len(nodes) == 4, string(out)
	})

	dir := sharedDir(t, "sguide-")
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	out = guide("user", dir, jobUser)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Contains(lines, "12") {
		t.Fatalf("the user's block: grep -c printed no 12:\n%s", out)
	}
	// sacct's lines: a header, a rule, then the job's, its steps'.
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "-----") })
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("the user's block printed no sacct line:\n%s", out)
	}
	checkGuideSacct(t, lines[i+1], filepath.Join(dir, "sweep.out"))

	guide("down", repo, owner{})
	if left := emu.Leftovers(name); len(left) > 0 {
		t.Errorf("the guide's cluster down left %v", left)
	}
}

// checkGuideSacct checks the guide's sacct line (JobID NodeList State
// TotalCPU) of the user's job: completed, on 3 nodes, its TotalCPU within
// guideCPUShare of what the jobs say they used (burn's cpu= lines in its
// output).
func checkGuideSacct(t *testing.T, line, output string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 4 || f[2] != "COMPLETED" {
		t.Fatalf("sacct's line of the user's job: %q, want JOBID NODES COMPLETED TIME", line)
	}
	nodes, err := slurm.ExpandHostlist(f[1])
	if err != nil || len(nodes) != 3 {
		t.Errorf("the user's job ran on %q, want 3 nodes", f[1])
	}
	got, ok := sacctSeconds(f[3])
	used := burnCPU(t, output)
	if !ok || got < used*(1-guideCPUShare) || got > used*(1+guideCPUShare) {
		t.Errorf("sacct's TotalCPU of the user's job: %s (%.2f s), the jobs used %.2f s: not within %.0f %%", f[3], got, used, 100*guideCPUShare)
	}
	t.Logf("sacct's TotalCPU of the guide's job: %.2f s; its jobs used %.2f s", got, used)
}

// guideCPUShare is how far sacct's count of a job's CPU time may be from
// what its processes used (issue 46: within 5 %).
const guideCPUShare = 0.05

// burnCPU sums the CPU seconds burn's "done cpu=" lines in file output say.
func burnCPU(t *testing.T, output string) float64 {
	t.Helper()
	b, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, m := range regexp.MustCompile(`burn: done cpu=([0-9.]+)`).FindAllSubmatch(b, -1) {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		sum += v
	}
	return sum
}

// sacctSeconds reads sacct's [DD-[HH:]]MM:SS[.mmm].
func sacctSeconds(s string) (float64, bool) {
	days := 0.0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		v, err := strconv.ParseFloat(d, 64)
		if err != nil {
			return 0, false
		}
		days, s = v, rest
	}
	total := 0.0
	for _, p := range strings.Split(s, ":") {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return 0, false
		}
		total = total*60 + v
	}
	return days*86400 + total, true
}
