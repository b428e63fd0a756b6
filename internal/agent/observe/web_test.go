package observe

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"roam/internal/api"

	"github.com/prometheus/client_golang/prometheus"
)

// Tokens: a token gives back its uid until it expires; an unknown one
// gives nothing; a uid holds at most perUID (its oldest goes); past max
// in all, minting is refused until some expire.
func TestTokens(t *testing.T) {
	now := time.Unix(1e9, 0)
	ts := NewTokens(time.Hour, 5, 2)
	a1, exp, err := ts.Mint(70001, now)
	if err != nil || !exp.Equal(now.Add(time.Hour)) || len(a1) != 43 {
		t.Fatalf("Mint: %q %v %v", a1, exp, err)
	}
	if uid, until, ok := ts.Check(a1, now); !ok || uid != 70001 || !until.Equal(exp) {
		t.Fatalf("Check of a fresh token: %d %v %v", uid, until, ok)
	}
	for _, bad := range []string{"", "x", a1[:42], a1 + "A", strings.ToUpper(a1)} {
		if uid, _, ok := ts.Check(bad, now); ok {
			t.Errorf("Check(%q) = %d, true", bad, uid)
		}
	}
	if _, _, ok := ts.Check(a1, now.Add(time.Hour)); ok {
		t.Error("a token past its hour still checks")
	}
	a1, _, _ = ts.Mint(70001, now)
	a2, _, _ := ts.Mint(70001, now.Add(time.Second))
	a3, _, _ := ts.Mint(70001, now.Add(2*time.Second)) // a1 goes
	if _, _, ok := ts.Check(a1, now.Add(3*time.Second)); ok {
		t.Error("a uid's oldest token stayed past its bound of 2")
	}
	for _, tok := range []string{a2, a3} {
		if uid, _, ok := ts.Check(tok, now.Add(3*time.Second)); !ok || uid != 70001 {
			t.Errorf("a uid's newer tokens: %d %v", uid, ok)
		}
	}
	r, _, _ := ts.Mint(0, now)
	if uid, _, ok := ts.Check(r, now); !ok || uid != 0 {
		t.Errorf("root's token: %d %v", uid, ok)
	}
	ts.Mint(70002, now)
	ts.Mint(70002, now)
	if n := ts.Len(now); n != 5 {
		t.Fatalf("%d tokens alive, want 5", n)
	}
	if _, _, err := ts.Mint(70003, now); err != ErrTooManyTokens {
		t.Errorf("a sixth token: %v, want %v", err, ErrTooManyTokens)
	}
	if _, _, err := ts.Mint(70003, now.Add(2*time.Hour)); err != nil {
		t.Errorf("once the others expired: %v", err)
	}
}

// Who sees what: root every job by name; a user their own by name and
// others' as counts by node and state; a page without a token counts
// only. Ended jobs are not shown; pending counts every user's.
func TestJobsByScope(t *testing.T) {
	jobs := newFakeCluster().jobs
	root := Jobs(Scope{User: true, UID: 0}, jobs)
	if len(root.Jobs) != 4 || len(root.Others) != 0 {
		t.Errorf("root: %d jobs by name, others %v; want 4 and none", len(root.Jobs), root.Others)
	}
	alice := Jobs(Scope{User: true, UID: 70001}, jobs)
	if len(alice.Jobs) != 2 || alice.Jobs[0].ID != "1.1" || alice.Jobs[1].ID != "1.2" {
		t.Errorf("alice's jobs: %+v", alice.Jobs)
	}
	if got := alice.Others; len(got) != 2 || got["1"]["starting"] != 1 || got["2"]["running"] != 1 {
		t.Errorf("alice's counts of others: %v", got)
	}
	anon := Jobs(Scope{}, jobs)
	if len(anon.Jobs) != 0 || anon.Others["1"]["running"] != 1 || anon.Others["2"]["running"] != 2 || anon.Others["1"]["starting"] != 1 {
		t.Errorf("anonymous: %+v", anon)
	}
	for _, v := range []JobsView{root, alice, anon} {
		if v.Pending != 1 || v.Total["running"] != 3 || v.Total["finished"] != 0 {
			t.Errorf("pending %d, totals %v; want 1 pending, 3 running, no finished", v.Pending, v.Total)
		}
	}
	b, _ := json.Marshal(alice)
	for _, leak := range []string{"bob", "1.3", "2.1", "bob-sweep", "bob-on-2"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("alice's view names %q: %s", leak, b)
		}
	}
	e := event{EventView: EventView{Kind: "migrate", Job: "1.3", From: "1", To: "2", Why: "/home/bob/x"}, uid: 70002, owned: true}
	if v := e.view(Scope{User: true, UID: 70001}); v.Job != "" || v.Why != "" || v.From != "1" || v.To != "2" {
		t.Errorf("another user's event: %+v", v)
	}
	if v := e.view(Scope{}); v.Job != "" || v.Why != "" {
		t.Errorf("an event without a token: %+v", v)
	}
	if v := e.view(Scope{User: true, UID: 70002}); v.Job != "1.3" || v.Why == "" {
		t.Errorf("the owner's event: %+v", v)
	}
	if v := e.view(Scope{User: true}); v.Job != "1.3" || v.Why == "" {
		t.Errorf("root's event: %+v", v)
	}
	unknown := event{EventView: EventView{Kind: "place", Job: "1.9"}}
	if v := unknown.view(Scope{User: true, UID: 70001}); v.Job != "" {
		t.Errorf("an event of an unknown owner shown to a user: %+v", v)
	}
}

// mintFor asks the token route as uid, as the roam socket would.
func mintFor(t *testing.T, s *Server, uid uint32) (api.WebToken, int) {
	t.Helper()
	mux := http.NewServeMux()
	s.SocketRoutes(mux, func(*http.Request) (uint32, bool) { return uid, true })
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, api.PathWebToken, nil))
	var tok api.WebToken
	_ = json.Unmarshal(rec.Body.Bytes(), &tok)
	return tok, rec.Code
}

func tokenOf(t *testing.T, u string) string {
	t.Helper()
	_, tok, ok := strings.Cut(u, "/#token=")
	if !ok {
		t.Fatalf("no token in %q", u)
	}
	return tok
}

// A page's stream in each scope: alice's page names her jobs and counts
// bob's; a page without a token counts them all; a made-up token is
// refused. A migration that appears in a job's log is sent as an event
// to every page, by name only to the job's owner.
func TestStreamByScope(t *testing.T) {
	f := newFakeCluster()
	s := startServer(t, f, "")
	base := "http://" + s.Addr()
	tok, code := mintFor(t, s, 70001)
	if code != http.StatusOK || !strings.HasPrefix(tok.URL, base+"/#token=") || tok.Expires.Before(time.Now().Add(tokenTTL-time.Minute)) {
		t.Fatalf("mint: %d %+v", code, tok)
	}
	if _, code := openStream(t, base, "made-up"); code != http.StatusForbidden {
		t.Errorf("a made-up token: %d, want 403", code)
	}
	alice, _ := openStream(t, base, tokenOf(t, tok.URL))
	anon, _ := openStream(t, base, "")
	hello := alice.waitFor(t, "hello", func(string) bool { return true })
	if !strings.Contains(hello, `"scope":"uid 70001"`) {
		t.Errorf("alice's hello: %s", hello)
	}
	alice.waitFor(t, "nodes", func(d string) bool {
		return strings.Contains(d, `"id":"2"`) && strings.Contains(d, `"mem_free_bytes":52428800`)
	})
	jobs := alice.waitFor(t, "jobs", func(string) bool { return true })
	if !strings.Contains(jobs, "alice-secret-sim") || strings.Contains(jobs, "bob") {
		t.Errorf("alice's jobs: %s", jobs)
	}
	jobs = anon.waitFor(t, "jobs", func(string) bool { return true })
	if strings.Contains(jobs, "alice") || strings.Contains(jobs, "bob") || !strings.Contains(jobs, `"2":{"running":2}`) {
		t.Errorf("the jobs without a token: %s", jobs)
	}
	// bob's job 1.3 moves from node 1 to node 2, then alice's 1.1.
	f.mu.Lock()
	f.jobs[2].Node, f.jobs[2].Migrations = "2", 1
	f.jobs[2].MigrationLog = []api.Migration{{MID: "m1", OK: true, From: "1", To: "2", At: time.Now()}}
	f.jobs[0].MigrationLog = []api.Migration{{MID: "m2", OK: true, From: "2", To: "1", At: time.Now()}}
	f.mu.Unlock()
	// A migration of an hour ago, first listed now (its home did not
	// answer before), is not news.
	f.mu.Lock()
	f.jobs[1].MigrationLog = []api.Migration{{MID: "m0", OK: true, From: "3", To: "1", At: time.Now().Add(-time.Hour)}}
	f.mu.Unlock()
	ev := alice.waitFor(t, "event", func(d string) bool { return strings.Contains(d, `"from":"1"`) })
	// The job's id is looked for as a field: a timestamp's digits may
	// spell "1.3" too.
	if strings.Contains(ev, `"job":"1.3"`) || !strings.Contains(ev, `"kind":"migrate"`) {
		t.Errorf("bob's migration on alice's page: %s", ev)
	}
	alice.waitFor(t, "event", func(d string) bool { return strings.Contains(d, `"job":"1.1"`) })
	ev = anon.waitFor(t, "event", func(d string) bool { return strings.Contains(d, `"from":"2"`) })
	if strings.Contains(ev, `"job":"1.1"`) {
		t.Errorf("alice's migration without a token: %s", ev)
	}
	// A placement from the scheduler's events.
	f.mu.Lock()
	f.events = append(f.events, api.Event{At: time.Now(), Kind: "place", Job: "1.5", UID: u32(70001), To: "3", Why: "least loaded"})
	f.mu.Unlock()
	alice.waitFor(t, "event", func(d string) bool { return strings.Contains(d, `"job":"1.5"`) && strings.Contains(d, "least loaded") })
	anon.waitFor(t, "event", func(d string) bool {
		return strings.Contains(d, `"kind":"place"`) && !strings.Contains(d, `"job":"1.5"`)
	})
	for _, m := range alice.seen {
		if m.name == "event" && strings.Contains(m.data, `"from":"3"`) {
			t.Errorf("an hour-old migration told as news: %s", m.data)
		}
	}
}

// Pages are bounded: maxStreamsPerKey for one user, maxStreams on the
// node, then refused; the page itself and its script are served,
// embedded; nothing but GET is.
func TestStreamBounds(t *testing.T) {
	s := startServer(t, newFakeCluster(), "")
	base := "http://" + s.Addr()
	tok, _ := mintFor(t, s, 70001)
	for range maxStreamsPerKey {
		if _, code := openStream(t, base, tokenOf(t, tok.URL)); code != http.StatusOK {
			t.Fatalf("a page within the bound: %d", code)
		}
	}
	if _, code := openStream(t, base, tokenOf(t, tok.URL)); code != http.StatusTooManyRequests {
		t.Errorf("one page more than %d for a user: %d, want 429", maxStreamsPerKey, code)
	}
	// Other users, each from an address of their own (an address holds
	// at most maxConnsPerIP connections), fill the node's bound of
	// maxStreams, then one more is refused, whoever asks.
	for uid := uint32(70002); uid < 70002+(maxStreams-maxStreamsPerKey)/maxStreamsPerKey; uid++ {
		tok, _ := mintFor(t, s, uid)
		from := net.IPv4(127, 0, 1, byte(uid-70000))
		for range maxStreamsPerKey {
			if _, code := openStreamFrom(t, base, tokenOf(t, tok.URL), from); code != http.StatusOK {
				t.Fatalf("uid %d's page within the bounds: %d", uid, code)
			}
		}
	}
	last, _ := mintFor(t, s, 79999)
	if _, code := openStreamFrom(t, base, tokenOf(t, last.URL), net.IPv4(127, 0, 1, 99)); code != http.StatusTooManyRequests {
		t.Errorf("page %d on the node: %d, want 429", maxStreams+1, code)
	}
	for path, want := range map[string]string{"/": "<title>roam</title>", "/app.js": "new EventSource(", "/style.css": ".node"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d, no %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Post(base+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

// A page's stream outlives the time a request may take to arrive and
// any one write: it ends only when the page goes.
func TestStreamOutlivesTheHeaderTimeout(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.headerTimeout = 200 * time.Millisecond
	if err := s.Start(newFakeCluster().source(), prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	st, _ := openStream(t, "http://"+s.Addr(), "")
	st.waitFor(t, "hello", func(string) bool { return true })
	opened := time.Now()
	// Samples come every second: the third is well past the timeout.
	for range 3 {
		st.waitFor(t, "nodes", func(string) bool { return time.Since(opened) > 0 })
		st.seen = nil
	}
	if time.Since(opened) < 10*s.headerTimeout {
		t.Fatalf("three samples within %v", time.Since(opened))
	}
}

// The listener holds at most maxConnsPerIP connections of one address:
// one more is closed at once.
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	s := startServer(t, newFakeCluster(), "")
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range maxConnsPerIP {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The listener counts a connection when it accepts it: one request
	// on the last makes sure all are accepted.
	last := held[len(held)-1]
	if _, err := last.Write([]byte("GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := last.Read(make([]byte, 64)); err != nil {
		t.Fatalf("a connection within the bound: %v", err)
	}
	over, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection %d of one address: read %d, %v; want it closed (EOF)", maxConnsPerIP+1, n, err)
	}
}

// With no listener (metrics_addr empty) the token route says so.
func TestTokenRouteWithoutListener(t *testing.T) {
	s := New(Config{}, nil)
	if err := s.Start(Source{}, nil); err != nil {
		t.Fatal(err)
	}
	_, code := mintFor(t, s, 70001)
	if code != http.StatusServiceUnavailable {
		t.Errorf("a token with no listener: %d, want 503", code)
	}
}
