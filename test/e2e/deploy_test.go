package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/ckpt"
)

// The package and the deployment guide. `make deb` builds the package from
// this tree; its files are checked in a scratch root, its roamd checks the
// sample config and systemd-analyze the unit. Then docs/deploy.md is
// followed on three emulated hosts: each its own network namespace on a
// bridge (198.18.31.0/24), its own UTS name (host1..3, the default node
// id) and its own /etc/roam, /var/lib/roam, /run/roam and /tmp; every one
// runs the package's roamd from the sample config with only the join list
// changed (no address anywhere), with one secret made by roam keygen on
// host1. The cluster forms, a job placed on another host returns its
// output and exit status, and a job working in the shared directory
// migrates between hosts.
func TestPackageAndDeployGuide(t *testing.T) {
	// Not under /tmp: each emulated host has a /tmp of its own; nor under
	// /var/tmp: roam-init is there, and a job's /tmp and /var/tmp are its
	// own.
	var out []byte
	scratch, err := os.MkdirTemp("/var/lib", "roam-pkg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	out, err = exec.Command("make", "-C", "../..", "--no-print-directory", "deb",
		"REL="+scratch+"/rel", "DEBROOT="+scratch+"/stage", "DEBOUT="+scratch).CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(scratch, "roam_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb made %v", debs)
	}
	deb := debs[0]
	info, err := exec.Command("dpkg-deb", "-f", deb, "Version", "Recommends").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(scratch, "root")
	if out, err := exec.Command("dpkg", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x: %v: %s", err, out)
	}
	for f, mode := range map[string]os.FileMode{
		"usr/bin/roam": 0o755, "usr/sbin/roamd": 0o755, "usr/libexec/roam/roam-init": 0o755,
		"lib/systemd/system/roamd.service": 0o644, "etc/roam/roamd.yaml": 0o644,
		"usr/share/man/man1/roam.1.gz": 0o644, "usr/share/man/man1/roam-run.1.gz": 0o644, "usr/share/man/man8/roamd.8.gz": 0o644,
		"usr/share/bash-completion/completions/roam": 0o644, "usr/share/zsh/vendor-completions/_roam": 0o644,
		"usr/share/fish/vendor_completions.d/roam.fish": 0o644, "usr/share/doc/roam/deploy.md": 0o644,
		"usr/share/doc/roam/copyright": 0o644, "usr/share/doc/roam/LICENSE": 0o644, "usr/libexec/roam/install-criu": 0o755,
		"usr/libexec/roam/criu-patches/0001-uffd-open-dev-userfaultfd.patch":          0o644,
		"usr/libexec/roam/criu-patches/0002-pipes-restore-size-through-usernsd.patch": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(root, f))
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("package file %s: %v (mode %v, want %v)", f, err, fi.Mode().Perm(), mode)
		}
	}
	// The packaged install-criu finds its CRIU patches beside it: the same
	// set as the source tree's, so it builds the CRIU the tests ran.
	mark := func(script string) string {
		out, err := exec.Command("bash", "-c", `. "$0"; patches_mark`, script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: patches_mark: %v: %s", script, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := mark(filepath.Join(root, "usr/libexec/roam/install-criu")), mark("../../scripts/install-criu.sh"); got != want {
		t.Fatalf("the package's install-criu marks its CRIU %q, the source tree's %q", got, want)
	}
	// The copyright file states roam's licence and every Go module's
	// linked into the binaries it ships, with its text.
	copyright, _ := os.ReadFile(filepath.Join(root, "usr/share/doc/roam/copyright"))
	if !bytes.Contains(copyright, []byte("Licensed under the Apache License, Version 2.0")) {
		t.Fatalf("the copyright file does not state roam's licence:\n%.400s", copyright)
	}
	linked, err := exec.Command("go", "version", "-m", filepath.Join(root, "usr/sbin/roamd"), filepath.Join(root, "usr/bin/roam")).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(linked), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "dep" && !bytes.Contains(copyright, []byte("---- "+f[1]+" "+f[2]+" ----\n\n")) {
			t.Errorf("the copyright file has no licence for %s %s", f[1], f[2])
		}
	}
	// The node package leaves the developer's commands out.
	for _, tool := range []string{"bench", "cluster"} {
		out, err := exec.Command(filepath.Join(root, "usr/bin/roam"), tool, "--help").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown command "`+tool+`"`) {
			t.Errorf("the package's roam %s: %v, %q; want an unknown command", tool, err, out)
		}
	}
	ver, err := exec.Command(filepath.Join(root, "usr/sbin/roamd"), "--version").Output()
	if err != nil || !strings.Contains(string(info), "Version: "+strings.TrimPrefix(strings.TrimSpace(string(ver)), "roamd ")) ||
		!strings.Contains(string(info), "Recommends: criu (>= 4.2)") {
		t.Fatalf("package fields %q, roamd --version %q (%v)", info, ver, err)
	}
	if conf, _ := exec.Command("dpkg-deb", "--ctrl-tarfile", deb).Output(); !bytes.Contains(conf, []byte("/etc/roam/roamd.yaml")) {
		t.Fatal("the sample config is not a conffile")
	}
	// The sample config as installed: without the secret roamd says which
	// file is missing; with a private secret and a join peer it is usable.
	sample := filepath.Join(root, "etc/roam/roamd.yaml")
	if _, err := os.Stat("/etc/roam/secret"); os.IsNotExist(err) {
		out, err := exec.Command(filepath.Join(root, "usr/sbin/roamd"), "--check-config", "--config", sample).CombinedOutput()
		if exitCodeOf(err) != 2 || !strings.Contains(string(out), "/etc/roam/secret") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Fatalf("check-config without the secret: %v: %s", err, out)
		}
	}
	sec := filepath.Join(scratch, "secret")
	if out, err := exec.Command(filepath.Join(root, "usr/bin/roam"), "keygen", "--out", sec).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v %s", err, out)
	}
	b, _ := os.ReadFile(sample)
	checked := filepath.Join(scratch, "check.yaml")
	os.WriteFile(checked, []byte(strings.Replace(string(b), "join: []", "join: [127.0.0.1]\nsecret_file: "+sec, 1)), 0o644)
	out, err = exec.Command(filepath.Join(root, "usr/sbin/roamd"), "--check-config", "--config", checked).CombinedOutput()
	// It says how users' jobs run: this host allows user namespaces.
	if err != nil || !strings.Contains(string(out), "advertises  127.0.0.1") || !strings.Contains(string(out), filepath.Join(root, "usr/libexec/roam/roam-init")) ||
		!strings.Contains(string(out), "user jobs   in user namespaces of their own") {
		t.Fatalf("check-config of the sample: %v:\n%s", err, out)
	}
	// scripts/deps.sh installs it (Debian's systemd): without it the
	// unit would go unverified, so its absence fails.
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		unit, _ := os.ReadFile(filepath.Join(root, "lib/systemd/system/roamd.service"))
		local := filepath.Join(scratch, "roamd.service")
		os.WriteFile(local, bytes.ReplaceAll(unit, []byte("/usr/sbin/roamd"), []byte(filepath.Join(root, "usr/sbin/roamd"))), 0o644)
		if out, err := exec.Command(sa, "verify", "--man=no", local).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Fatal("no systemd-analyze here (scripts/deps.sh installs Debian's systemd): the unit is not verified")
	}

	followGuide(t, root, sec)
}

// dhost is one emulated host of the guide's cluster.
type dhost struct {
	name, ns, addr string
	dir            string // its /etc/roam, /var/lib/roam, /run/roam, /tmp
	pid            int
}

func (h dhost) socket() string { return filepath.Join(h.dir, "run", "roamd.sock") }

// followGuide does docs/deploy.md's steps 2 to 6 on three hosts.
func followGuide(t *testing.T, root, secret string) {
	base, err := os.MkdirTemp("/var/lib", "roam-guide-")
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(base, "shared")
	os.MkdirAll(shared, 0o755)
	os.Chmod(base, 0o755)
	var hosts []*dhost
	t.Cleanup(func() { tearDownGuide(t, hosts, base) })
	// The mount points of the hosts' own directories, on this machine.
	for _, d := range []string{"/etc/roam", "/var/lib/roam", "/run/roam"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(d) })
		}
	}
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	sh("ip", "link", "add", "rguide", "type", "bridge")
	sh("ip", "link", "set", "rguide", "up")
	sample, _ := os.ReadFile(filepath.Join(root, "etc/roam/roamd.yaml"))
	for i := 1; i <= 3; i++ {
		h := &dhost{name: fmt.Sprintf("host%d", i), ns: fmt.Sprintf("rguide-%d", i), addr: fmt.Sprintf("198.18.31.%d", i),
			dir: filepath.Join(base, fmt.Sprintf("host%d", i))}
		hosts = append(hosts, h)
		veth := fmt.Sprintf("rgv-%d", i)
		sh("ip", "netns", "add", h.ns)
		sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		sh("ip", "link", "set", veth, "master", "rguide")
		sh("ip", "link", "set", veth, "up")
		sh("ip", "-n", h.ns, "addr", "add", h.addr+"/24", "dev", "eth0")
		sh("ip", "-n", h.ns, "link", "set", "eth0", "up")
		sh("ip", "-n", h.ns, "link", "set", "lo", "up")
		for _, d := range []string{"etc", "var", "run", "tmp"} {
			os.MkdirAll(filepath.Join(h.dir, d), 0o755)
		}
		os.Chmod(filepath.Join(h.dir, "tmp"), 0o777|os.ModeSticky)
		// Step 1: the package's files, as installed.
		cfg := string(sample)
		// Step 3: the others join host1; the shared directory is a plain
		// directory here, not a network filesystem, so it is named.
		if i > 1 {
			cfg = strings.Replace(cfg, "join: []", "join: [198.18.31.1]", 1)
		}
		cfg = strings.Replace(cfg, "#shared_dirs: [/home, /srv/shared]", "shared_dirs: ["+shared+"]", 1)
		os.WriteFile(filepath.Join(h.dir, "etc", "roamd.yaml"), []byte(cfg), 0o644)
	}
	// Step 2: the secret, made on host1 and copied, private, to the others.
	for _, h := range hosts {
		sh("cp", "-p", secret, filepath.Join(h.dir, "etc", "secret"))
	}
	// Each host has a cgroup tree of its own, as a container would: its
	// shell joins rguide/HOST, makes that the root of a new cgroup
	// namespace and mounts the controllers again there, so that the
	// host's roamd puts its jobs in what it sees as /roam/jobs/ID.
	layout, err := cgroup.Detect()
	if err != nil {
		t.Skip(err)
	}
	remount := cgroupRemounts(t, layout)
	// Steps 4 and 5: check the config, then start the agent as the unit
	// does, in the host's own namespaces.
	for _, h := range hosts {
		if err := layout.Create("rguide/" + h.name); err != nil {
			t.Fatal(err)
		}
		outer := "set -e\n"
		for _, d := range layout.Dirs("rguide/" + h.name) {
			outer += "echo $$ > " + d + "/cgroup.procs\n"
		}
		outer += `exec nsenter --net=/run/netns/` + h.ns + ` unshare --cgroup sh -ec "$ROAM_GUIDE_HOST"`
		inner := fmt.Sprintf(`%s
hostname %s
mount --bind %s/etc /etc/roam
mount --bind %s/var /var/lib/roam
mount --bind %s/run /run/roam
mount --bind %s/tmp /tmp
%s/usr/sbin/roamd --check-config --config /etc/roam/roamd.yaml >&2
exec %s/usr/sbin/roamd --config /etc/roam/roamd.yaml`, remount, h.name, h.dir, h.dir, h.dir, h.dir, root, root)
		cmd := exec.Command("unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", outer)
		cmd.Env = append(os.Environ(), "ROAM_GUIDE_HOST="+inner)
		logf, _ := os.Create(filepath.Join(h.dir, "roamd.log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		h.pid = cmd.Process.Pid
		go cmd.Wait()
	}
	roam := func(h *dhost, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(root, "usr/bin/roam"), append([]string{"--socket", h.socket()}, args...)...)
		cmd.Dir = shared
		return cmd
	}
	nodes := func(h *dhost) []api.NodeInfo {
		var ns []api.NodeInfo
		out, err := roam(h, "nodes", "--json").Output()
		if err == nil {
			json.Unmarshal(out, &ns)
		}
		return ns
	}
	// Step 6: every host sees the three, each at its own address, with
	// its load known.
	waitFor(t, 30*time.Second, "three hosts alive with their loads", func() (bool, string) {
		for _, h := range hosts {
			ns := nodes(h)
			ok := 0
			for _, n := range ns {
				host := strings.TrimPrefix(n.ID, "host")
				if n.Alive && n.Load != nil && strings.HasPrefix(n.Addr, "198.18.31."+host+":") {
					ok++
				}
			}
			if ok != 3 {
				log, _ := os.ReadFile(filepath.Join(h.dir, "roamd.log"))
				return false, fmt.Sprintf("%s sees %+v; its log:\n%s", h.name, ns, lastLines(string(log), 5))
			}
		}
		return true, ""
	})
	// Three jobs, placed where the load vector says: each one's output
	// names the host its record says it ran on. (Where they go depends on
	// the loads measured at that moment, so the spread is not asserted.)
	run := roam(hosts[0], "run", "-n", "3", "--", "sh", "-c", "hostname; exit 3")
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if exitCodeOf(err) != 3 {
		t.Fatalf("roam run -n 3: exit %v: %s\nstandard error:\n%s", err, out, stderr.Bytes())
	}
	lines := regexp.MustCompile(`(?m)^\[(\S+)\] (\S+)$`).FindAllStringSubmatch(string(out), -1)
	if len(lines) != 3 {
		t.Fatalf("roam run -n 3 printed:\n%s", out)
	}
	var jobs []api.Job
	if b, err := roam(hosts[0], "ps", "--json").Output(); err != nil || json.Unmarshal(b, &jobs) != nil {
		t.Fatalf("ps: %v %s", err, b)
	}
	for _, l := range lines {
		ran := ""
		for _, j := range jobs {
			if j.ID == l[1] {
				ran = j.Node
			}
		}
		if ran != l[2] {
			t.Fatalf("job %s printed host name %s, its record says it ran on %q", l[1], l[2], ran)
		}
	}
	// And a job typed for each other host runs there, its output and
	// status come back.
	for _, h := range hosts[1:] {
		out, err := roam(hosts[0], "run", "--on", h.name, "--", "sh", "-c", "hostname; exit 3").Output()
		if exitCodeOf(err) != 3 || string(out) != h.name+"\n" {
			t.Fatalf("roam run --on %s: exit %v: %q", h.name, err, out)
		}
	}
	// A job holding a file open in its host's own /var/lib/roam (outside
	// the shared directory) is pinned, with the reason, and runs on where
	// it is; the same job with its file in the shared directory migrates
	// host1 -> host2 -> host3 -> host1.
	holder := func(file string) string {
		out, err := roam(hosts[0], "run", "-d", "--on", "host1", "--", "sh", "-c",
			"exec 3>>"+file+"; i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo $i >&3; sleep 0.2; done; wc -l < "+file).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	local := holder("/var/lib/roam/held")
	// The job runs in a cgroup of its own, out of the agent's: the default
	// job_cgroup, /roam/jobs/ID as host1 sees it. Its CPU group is its own
	// too where its --cpus (1 by default) is less than the host's cores,
	// which a host's capacity is: a quota of its own.
	cpuGroup := "/rguide/host1/roam"
	if runtime.NumCPU() > 1 {
		cpuGroup += "/jobs/" + local
	}
	waitFor(t, 10*time.Second, local+" in its own cgroup", func() (bool, string) {
		ps, _ := copies(local)
		if len(ps) != 1 {
			return false, fmt.Sprint(ps)
		}
		g := procGroups(ps[0])
		return g["memory"] == "/rguide/host1/roam/jobs/"+local && g["cpu"] == cpuGroup, fmt.Sprint(g)
	})
	time.Sleep(time.Second)
	out, err = roam(hosts[0], "migrate", local, "host2").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds open /var/lib/roam/held, on this node's own filesystem") {
		t.Fatalf("a job with a file in host1's /var/lib/roam: migrate: %v: %s", err, out)
	}
	if out, err := roam(hosts[0], "attach", local).Output(); err != nil || strings.TrimSpace(string(out)) != "40" {
		t.Fatalf("the pinned job: %v: %q", err, out)
	}
	id := holder(filepath.Join(shared, "count"))
	for _, to := range []string{"host2", "host3", "host1"} {
		time.Sleep(time.Second)
		if out, err := roam(hosts[0], "migrate", id, to).CombinedOutput(); err != nil {
			t.Fatalf("migrate to %s: %v: %s", to, err, out)
		}
	}
	out, err = roam(hosts[0], "attach", id).Output()
	if err != nil || strings.TrimSpace(string(out)) != "40" {
		t.Fatalf("the migrated job: %v: %q", err, out)
	}
	var js []api.Job
	psOut, _ := roam(hosts[0], "ps", "--json").Output()
	json.Unmarshal(psOut, &js)
	for _, j := range js {
		if j.ID == id && (j.Node != "host1" || j.Migrations != 3) {
			t.Fatalf("after three moves: %+v", j)
		}
	}
}

// tearDownGuide stops the hosts' agents (by pid) and their jobs, and
// removes the namespaces, links and directories.
func tearDownGuide(t *testing.T, hosts []*dhost, base string) {
	for _, h := range hosts {
		if h.pid > 0 {
			syscall.Kill(h.pid, syscall.SIGTERM)
		}
	}
	for _, h := range hosts {
		for i := 0; i < 100 && h.pid > 0 && syscall.Kill(h.pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if h.pid > 0 {
			syscall.Kill(h.pid, syscall.SIGKILL)
		}
	}
	for pid, dir := range initsUnder(base) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Logf("killed a job left running: roam-init %d (%s)", pid, dir)
	}
	for _, h := range hosts {
		exec.Command("ip", "netns", "del", h.ns).Run()
	}
	exec.Command("ip", "link", "del", "rguide").Run()
	os.RemoveAll(base)
	if l, err := cgroup.Detect(); err == nil {
		if err := l.Remove("rguide"); err != nil {
			t.Errorf("the hosts' cgroups: %v", err)
		}
	}
}

// initsUnder lists roam-init processes whose job spool is under base.
func initsUnder(base string) map[int]string {
	out := map[int]string{}
	for pid, spool := range ckpt.Inits() {
		if strings.HasPrefix(spool, base) {
			out[pid] = spool
		}
	}
	return out
}

// cgroupRemounts is the shell that mounts the controllers roam uses again
// at their places, each with the options it has on this machine, so that
// a shell in a new cgroup namespace sees its own group as their root.
func cgroupRemounts(t *testing.T, layout cgroup.Layout) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range layout.Dirs("") {
		d = filepath.Clean(d)
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 4 || f[1] != d {
				continue
			}
			if f[2] == "cgroup2" {
				out = append(out, "umount "+d, "mount -t cgroup2 cgroup2 "+d)
				break
			}
			var ctrls []string
			for _, o := range strings.Split(f[3], ",") {
				switch {
				case o == "rw", o == "ro", o == "nosuid", o == "nodev", o == "noexec", strings.HasSuffix(o, "atime"):
				default:
					ctrls = append(ctrls, o)
				}
			}
			out = append(out, "umount "+d, "mount -t cgroup -o "+strings.Join(ctrls, ",")+" cgroup "+d)
			break
		}
	}
	return strings.Join(out, "\n")
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
