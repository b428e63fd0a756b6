package observe

import (
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"
)

// scrape GETs /metrics and parses it with Prometheus's text parser.
func scrape(t *testing.T, url string, auth func(*http.Request)) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if auth != nil {
		auth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse as Prometheus text: %v", err)
	}
	return fams, resp.StatusCode
}

// series lists a family's samples as "label=value,... value", the
// labels in the parser's order (by name).
func series(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		out = append(out, strings.Join(ls, ",")+" "+strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64))
	}
	sort.Strings(out)
	return out
}

// The scrape over TCP holds the job gauges of this home node by node and
// state, and by user too with metrics_job_users only (whoever reaches
// the listener would read every user's name).
func TestScrapeNamesUsersOnlyWhenAsked(t *testing.T) {
	f := newFakeCluster()
	s := startServer(t, f, "")
	fams, code := scrape(t, "http://"+s.Addr(), nil)
	if code != http.StatusOK {
		t.Fatalf("scrape: %d", code)
	}
	want := []string{"node=1,state=finished 1", "node=1,state=running 1", "node=1,state=starting 1", "node=2,state=running 1"}
	if got := series(fams["roam_jobs"]); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("roam_jobs without metrics_job_users:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// With metrics_job_users, the scrape over TCP holds the job gauges of
// this home node by node, user and state, the membership and version
// series, the agent's own metrics and the standard Go, process and
// build-info collectors, and it parses as Prometheus text.
func TestScrapeOverTCP(t *testing.T) {
	f := newFakeCluster()
	s := startServerWith(t, f, Config{Addr: "127.0.0.1:0", JobUsers: true})
	fams, code := scrape(t, "http://"+s.Addr(), nil)
	if code != http.StatusOK {
		t.Fatalf("scrape: %d", code)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes",
		"go_build_info", "roam_version_info", "roam_node_load", "roam_jobs", "roam_member_up", "roam_member_draining", "roam_member_version_info"} {
		if fams[name] == nil {
			t.Errorf("the scrape has no %s", name)
		}
	}
	if t.Failed() {
		return
	}
	// Jobs whose home is node 1 (the fake's self), each counted once;
	// 2.1's home is node 2, which reports it itself.
	want := []string{
		"node=1,state=finished,user=bob 1",
		"node=1,state=running,user=alice 1",
		"node=1,state=starting,user=bob 1",
		"node=2,state=running,user=alice 1",
	}
	if got := series(fams["roam_jobs"]); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("roam_jobs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := series(fams["roam_member_up"]), []string{"node=1 1", "node=2 1", "node=3 0"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("roam_member_up: %v, want %v", got, want)
	}
	if got, want := series(fams["roam_member_draining"]), []string{"node=1 0", "node=2 1", "node=3 0"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("roam_member_draining: %v, want %v", got, want)
	}
	if got := series(fams["roam_member_version_info"]); len(got) != 3 || got[2] != "node=3,version=v8 1" {
		t.Errorf("roam_member_version_info: %v", got)
	}
	// A job that starts changes the gauges at the next scrape (within
	// metricsMaxAge of the last fetch).
	f.mu.Lock()
	f.jobs[2].State = "running"
	f.mu.Unlock()
	s.hubForTest().expireJobs()
	fams, _ = scrape(t, "http://"+s.Addr(), nil)
	if got := series(fams["roam_jobs"]); !contains(got, "node=1,state=running,user=bob 1") || contains(got, "node=1,state=starting,user=bob 1") {
		t.Errorf("roam_jobs after the change: %v", got)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// With basic auth in the web config file, a scrape, the page and its
// stream without the password, or with a wrong one, are refused; with it
// they are served.
func TestBasicAuthRefusesTheUnauthenticated(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := CheckConfig("127.0.0.1:9947", cfg); err != nil {
		t.Fatalf("CheckConfig: %s: %v", key, err)
	}
	s := startServer(t, newFakeCluster(), cfg)
	base := "http://" + s.Addr()
	for _, path := range []string{"/metrics", "/", "/events", "/app.js"} {
		for name, auth := range map[string]func(*http.Request){
			"no auth":        nil,
			"wrong password": func(r *http.Request) { r.SetBasicAuth("prom", "guess") },
			"unknown user":   func(r *http.Request) { r.SetBasicAuth("root", "s3cret") },
		} {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			if auth != nil {
				auth(req)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with %s: %d, want 401", path, name, resp.StatusCode)
			}
		}
	}
	fams, code := scrape(t, base, func(r *http.Request) { r.SetBasicAuth("prom", "s3cret") })
	if code != http.StatusOK || fams["roam_jobs"] == nil {
		t.Fatalf("the scrape with the password: %d, roam_jobs %v", code, fams["roam_jobs"] != nil)
	}
}
