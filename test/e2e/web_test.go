package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// webUser is a test user of the web view: a uid above 65,535 with
// supplementary groups, and no passwd entry.
type webUser struct {
	uid, gid uint32
	groups   []uint32
}

// as runs the CLI against this cluster as u.
func (u webUser) roam(c *cluster, args ...string) (string, error) {
	cmd := c.roamCmd(args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return string(out), err
}

func (u webUser) mustRoam(c *cluster, args ...string) string {
	c.t.Helper()
	out, err := u.roam(c, args...)
	if err != nil {
		c.t.Fatalf("roam %s as uid %d: %v", strings.Join(args, " "), u.uid, err)
	}
	return strings.TrimSpace(out)
}

// browser is a headless Debian chromium driven by chromedp, which can
// reach only the cluster's /24: every other address goes to a proxy on a
// loopback port nothing listens on, and no name resolves. It and its
// children end with the test.
func browser(t *testing.T, subnet int) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("no chromium: the web view's test drives Debian's chromium package (scripts/deps.sh installs it: apt-get install chromium)")
	}
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1100),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", fmt.Sprintf("198.18.%d.0/24", subnet)),
		chromedp.Flag("host-resolver-rules", fmt.Sprintf("MAP * ~NOTFOUND, EXCLUDE 198.18.%d.*", subnet)),
		chromedp.Flag("disable-component-update", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	pid := chromedp.FromContext(ctx).Browser.Process().Pid
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills chromium and waits for it
		// Its helpers (zygote, renderers, GPU) end with it; any that
		// does not within 10 s is killed by its pid and reported.
		deadline := time.Now().Add(10 * time.Second)
		for left := chromiumOf(profile); len(left) > 0; left = chromiumOf(profile) {
			if time.Now().After(deadline) {
				for _, p := range left {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Errorf("chromium (pid %d) left processes %v: killed", pid, left)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return ctx
}

// chromiumOf lists the live processes of the chromium whose profile is
// dir (its helpers carry the --user-data-dir too).
func chromiumOf(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), "--user-data-dir="+dir) {
			out = append(out, pid)
		}
	}
	return out
}

// page opens url in a new tab of the browser.
func page(t *testing.T, browserCtx context.Context, url string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	// The tab is made on its own context first: one made on a context
	// with a deadline ends with that context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("a tab: %v", err)
	}
	nav, cancelNav := context.WithTimeout(ctx, 15*time.Second)
	defer cancelNav()
	if err := chromedp.Do(nav, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", strings.Split(url, "#")[0], err)
	}
	return ctx
}

// waitPage evaluates js in the page until it returns true, within d.
func waitPage(t *testing.T, ctx context.Context, d time.Duration, what, js string) {
	t.Helper()
	waitFor(t, d, what, func() (bool, string) {
		call, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(call, chromedp.Evaluate[bool]("!!("+js+")"))
		cancel()
		if err != nil {
			return false, err.Error()
		}
		if ok {
			return true, ""
		}
		return false, "page: " + pageText(ctx)
	})
}

func pageText(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	return s
}

func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return s
}

// The web view in a real browser on a real 4-node cluster: the page
// shows every node; a non-root user's page names their own job and
// counts the others' (another user's, root's) without naming them; a
// `roam migrate` shows on that page (the test waits for it) without the
// job's id, and on root's page with it; a page without a token names no
// job. A screenshot of the user's page is kept in the test's artifact
// directory (go test -artifacts -outputdir DIR). The job that moves is
// root's, another user's for both users' pages.
func TestWebViewInABrowser(t *testing.T) {
	const subnet = 55
	ctx := browser(t, subnet)
	c := upCluster(t, "e2eobsw", subnet, "--nodes", "4", "--scheduler", "static")
	c.waitAllAlive(4)
	alice := webUser{uid: 70001, gid: 70001, groups: []uint32{70001, 70100, 70101}}
	bob := webUser{uid: 70002, gid: 70002, groups: []uint32{70002, 70100, 70102}}
	aliceJob := alice.mustRoam(c, "--node", "1", "run", "-d", "--on", "1", "--", "sleep", "6001")
	bobJob := bob.mustRoam(c, "--node", "2", "run", "-d", "--on", "2", "--", "sleep", "6002")
	rootJob := strings.TrimSpace(c.mustRun("--node", "1", "run", "-d", "--on", "1", "--", "sleep", "6003"))
	t.Cleanup(func() { _, _ = c.run("--node", "1", "kill", "-s", "KILL", aliceJob, bobJob, rootJob) })

	url := bob.mustRoam(c, "--node", "1", "web")
	if !strings.HasPrefix(url, fmt.Sprintf("http://198.18.%d.1:9947/#token=", subnet)) {
		t.Fatalf("roam web: %q", url)
	}
	bobPage := page(t, ctx, url)
	waitPage(t, bobPage, 15*time.Second, "every node on bob's page",
		`["1","2","3","4"].every(id => document.querySelector('#nodes .node[data-node="'+id+'"]'))`)
	if got := evalString(t, bobPage, "document.body.dataset.scope"); got != "uid 70002" {
		t.Errorf("bob's page is seen as %q", got)
	}
	waitPage(t, bobPage, 15*time.Second, "bob's job by name, the two others on node 1 as a count",
		`document.querySelector('#jobs tr[data-job="`+bobJob+`"][data-node="2"]') && document.querySelector('#others li[data-node="1"]')?.dataset.count === "2"`)
	noneOf := func(ctx context.Context, where string, named ...string) {
		t.Helper()
		text := pageText(ctx)
		for _, s := range named {
			if strings.Contains(text, s) {
				t.Fatalf("%s names %q:\n%s", where, s, text)
			}
		}
	}
	noneOf(bobPage, "bob's page", aliceJob, rootJob, "6001", "6003")

	// root moves its job 1 -> 3: bob's page shows a migration from 1 to 3
	// without the job's id, and counts it on node 3.
	c.mustRun("--node", "1", "migrate", rootJob, "3")
	done := time.Now()
	waitPage(t, bobPage, 10*time.Second, "root's migration on bob's page, unnamed",
		`document.querySelector('#events li[data-kind="migrate"][data-job=""][data-from="1"][data-to="3"]') && document.querySelector('#others li[data-node="3"]')?.dataset.count === "1"`)
	shown, _ := chromedp.Run(bobPage, chromedp.Evaluate[float64](`+document.querySelector('#events li[data-kind="migrate"][data-from="1"][data-to="3"]').dataset.shown`))
	t.Logf("the migration showed on the page %d ms after roam migrate returned", time.UnixMilli(int64(shown)).Sub(done).Milliseconds())
	noneOf(bobPage, "bob's page after the migration", aliceJob, rootJob, "6001", "6003")
	png, err := chromedp.Run(bobPage, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.ArtifactDir(), "web-bob.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of bob's page: %s (%d bytes)", shot, len(png))

	// Root's page names every job, and the migration's; a page without
	// a token names none.
	rootPage := page(t, ctx, c.mustRun("--node", "3", "web"))
	waitPage(t, rootPage, 15*time.Second, "every job by name on root's page",
		`document.querySelector('#jobs tr[data-job="`+aliceJob+`"][data-node="1"]') && document.querySelector('#jobs tr[data-job="`+bobJob+`"][data-node="2"]') && document.querySelector('#jobs tr[data-job="`+rootJob+`"][data-node="3"]')`)
	c.mustRun("--node", "3", "migrate", rootJob, "4")
	waitPage(t, rootPage, 10*time.Second, "root's migration by name on root's page",
		`document.querySelector('#events li[data-kind="migrate"][data-job="`+rootJob+`"][data-from="3"][data-to="4"]')`)
	anonPage := page(t, ctx, fmt.Sprintf("http://198.18.%d.2:9947/", subnet))
	waitPage(t, anonPage, 15*time.Second, "counts only without a token",
		`document.body.dataset.scope === "anonymous" && document.querySelector('#others li[data-node="1"]')?.dataset.count === "1" && document.querySelector('#others li[data-node="2"]')?.dataset.count === "1" && document.querySelector('#others li[data-node="4"]')?.dataset.count === "1"`)
	noneOf(anonPage, "the page without a token", aliceJob, bobJob, rootJob, "sleep 600")

	// The scrape of node 1 over TCP, parsed by Prometheus's text parser:
	// the job gauges of its home jobs (alice's and root's, root's moved
	// away), the standard collectors, and every series the example
	// dashboard queries.
	fams := scrapeNode(t, fmt.Sprintf("http://198.18.%d.1:9947/metrics", subnet))
	jobs := map[string]float64{}
	for _, m := range fams["roam_jobs"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		jobs[l["node"]+" "+l["user"]+" "+l["state"]] = m.GetGauge().GetValue()
	}
	if jobs["1 70001 running"] != 1 || jobs["4 root running"] != 1 || len(jobs) != 2 {
		t.Errorf("roam_jobs of node 1 (home of alice's and root's jobs): %v", jobs)
	}
	for _, name := range dashboardSeries(t) {
		if fams[name] == nil {
			t.Errorf("the dashboard queries %s, which node 1's scrape does not have", name)
		}
	}
}

// scrapeNode GETs a node's /metrics and parses it as Prometheus text.
func scrapeNode(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus text: %v", url, err)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "go_build_info", "roam_version_info", "roam_member_up", "roam_node_mem_free_bytes"} {
		if fams[name] == nil {
			t.Errorf("%s has no %s", url, name)
		}
	}
	return fams
}

// dashboardSeries are the metric families packaging/grafana's example
// dashboard queries.
func dashboardSeries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../packaging/grafana/roam-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					name = strings.TrimSuffix(name, suffix)
				}
				if !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("the dashboard queries only %v", out)
	}
	return out
}

var metricName = regexp.MustCompile(`\b(roam|go|process)_[a-z_]+\b`)
