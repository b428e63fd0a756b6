package agent

// Fuzz targets for the rest of what the agent takes from outside its
// process: the peer routes fuzz_peer_*_test.go's targets leave out (purge,
// migrate/out, drain, pages, a checkpoint's drop before a time, output
// offsets, a checkpoint file to keep or to restore), and every route of
// the CLI's socket, asked by two users and root. They run on fuzz_test.go's
// pooled agent.

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/agent/control"
	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/job"
	"roam/internal/migrate"
)

// fzSeal seals plain, a checkpoint file without its seals (its magic
// and binding lines, then its body), as a file of agent a: what a member
// of the cluster would send. The seals go after the two lines and after
// each chunk of the body (migrate/checkpoint.go).
func fzSeal(a *Agent, plain []byte) []byte {
	head, body := fzSplit(plain)
	mac := hmac.New(sha256.New, a.keeper.Key())
	mac.Write(head)
	prev := mac.Sum(nil)
	out := append(bytes.Clone(head), prev...)
	for len(body) > 0 {
		n := min(len(body), migrate.CheckpointChunk)
		mac := hmac.New(sha256.New, a.keeper.Key())
		mac.Write(prev)
		mac.Write(body[:n])
		prev = mac.Sum(nil)
		out = append(append(out, body[:n]...), prev...)
		body = body[n:]
	}
	return out
}

// fzSplit splits a plain checkpoint file into its two head lines and its
// body.
func fzSplit(plain []byte) (head, body []byte) {
	n := 0
	for i := 0; i < 2 && n < len(plain); i++ {
		if j := bytes.IndexByte(plain[n:], '\n'); j >= 0 {
			n += j + 1
		} else {
			n = len(plain)
		}
	}
	return plain[:n], plain[n:]
}

// fzCheckpoint is a checkpoint file of job id (uid 1000) as agent a
// writes one, unsealed: its magic, META and header, and an archive of one
// image.
func fzCheckpoint(tb testing.TB, id string, uid uint32) []byte {
	tb.Helper()
	home, _ := migrate.JobHome(id)
	h := migrate.Header{MID: "0123456789abcdef", From: "n3", ID: id, Home: home, HomeAddr: "10.0.0.1:7947", UID: uid, GID: uid,
		Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Inc: 1}
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "inventory.img"), []byte("inv"), 0o600); err != nil {
		tb.Fatal(err)
	}
	p, err := migrate.NewPlan(h, []migrate.File{{Name: "img/inventory.img", Path: filepath.Join(dir, "inventory.img"), Size: 3}})
	if err != nil {
		tb.Fatal(err)
	}
	meta := migrate.CheckpointMeta{Version: migrate.CheckpointVersion, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Node: "n3",
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Group: id, Started: h.Started}}
	bind := migrate.Binding{Cluster: "roam", UID: uid, GID: uid, Job: id, Expires: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := migrate.NewCheckpointPlan(bind, meta, p)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	// Sealed with an empty key, then unsealed: the target seals it again
	// with the agent's key when the input asks.
	if err := c.Write(&buf, nil, func(path string) (io.ReadCloser, error) { return os.Open(path) }); err != nil {
		tb.Fatal(err)
	}
	head, _ := fzSplit(bytes.Clone(buf.Bytes()))
	_, _, body, err := migrate.ReadHead(bufio.NewReader(&buf), nil)
	if err != nil {
		tb.Fatal(err)
	}
	plain, err := io.ReadAll(body)
	if err != nil {
		tb.Fatal(err)
	}
	return append(head, plain...)
}

// ---- peer port: the other routes ----

var fzControlRoutes = []string{"purge", "migrate/out", "drain", "pages", "ckpt/drop", "output"}

// FuzzPeerControl: /v1/peer/purge removes only ended jobs of the uid it
// names (or of every uid); /v1/peer/migrate/out of any body leaves every
// job running here as it was (the fuzz node moves none); /v1/peer/drain
// takes only drain and resume, and refuses leave while jobs run here;
// /v1/peer/pages serves no migration that is not under way; a drop's
// time and an output's offsets that do not parse are refused or read as
// zero, and an output holds the spool's bytes from its offset.
func FuzzPeerControl(f *testing.F) {
	f.Add(uint8(0), "", fzJSON(f, peer.PurgeRequest{UID: 1000}))
	f.Add(uint8(0), "", fzJSON(f, peer.PurgeRequest{All: true}))
	f.Add(uint8(0), "", []byte(`{"uid":-1}`))
	f.Add(uint8(1), "", fzJSON(f, peer.MigrateOutRequest{ID: fzLocal, To: "n3"}))
	f.Add(uint8(1), "", fzJSON(f, peer.MigrateOutRequest{ID: fzPinned, To: fzSelf, Lazy: true}))
	f.Add(uint8(1), "", fzJSON(f, peer.MigrateOutRequest{ID: "../n1.5", To: "n3"}))
	f.Add(uint8(2), peer.DrainOn, []byte(nil))
	f.Add(uint8(2), peer.DrainOff, []byte(nil))
	f.Add(uint8(2), peer.DrainLeave, []byte(nil))
	f.Add(uint8(3), fzMID, []byte(nil))
	f.Add(uint8(4), "2026-01-01T00:00:00Z", []byte(fzLocal))
	f.Add(uint8(4), "yesterday", []byte(fzHome))
	f.Add(uint8(5), "2", []byte("3"))
	f.Add(uint8(5), "-7", []byte("99999999999999999999"))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, route uint8, value string, body []byte) {
		a := pool.get(t)
		path := fzControlRoutes[int(route)%len(fzControlRoutes)]
		home := a.jobs.Homes()
		var w *httptest.ResponseRecorder
		switch path {
		case "purge":
			w = a.call(http.MethodPost, "/v1/peer/purge", body)
			fzStatus(t, w, path)
			var req peer.PurgeRequest
			ok := fzDecode(body, &req)
			if !ok && w.Code != http.StatusBadRequest {
				t.Fatalf("purge of %q answered %d", body, w.Code)
			}
			after := a.jobs.Homes()
			for id, r := range home {
				if _, kept := after[id]; !kept && (!ok || !r.Over() || !req.All && r.UID != req.UID) {
					t.Fatalf("purge %q removed job %s (uid %d, %s)", body, id, r.UID, r.State)
				}
			}
		case "migrate/out":
			w = a.call(http.MethodPost, "/v1/peer/migrate/out", body)
			if w.Code == http.StatusOK {
				t.Fatalf("migrate/out %q: a job left a node that moves none: %s", body, w.Body)
			}
			if !fzQuiet(t, a) {
				t.Fatalf("migrate/out %q: a migration runs on after its answer", body)
			}
			refs, _ := a.jobs.Refs()
			for _, id := range []string{fzLocal, fzPinned} {
				i := slices.IndexFunc(refs, func(r jobtable.JobRef) bool { return r.Rec.ID == id })
				if i < 0 || refs[i].Migrating {
					t.Fatalf("migrate/out %q: job %s no longer runs here as before (%+v)", body, id, refs)
				}
			}
			if len(a.node.signals) > 0 || len(a.node.kills) > 0 {
				t.Fatalf("migrate/out %q: signals %v and kills %v of jobs that run on", body, a.node.signals, a.node.kills)
			}
		case "drain":
			was := a.drain.On()
			w = a.call(http.MethodPost, "/v1/peer/drain?"+url.Values{"state": {value}}.Encode(), nil)
			fzStatus(t, w, path)
			now := a.drain.On()
			switch value {
			case peer.DrainOn, peer.DrainOff:
				if w.Code != http.StatusOK || now != (value == peer.DrainOn) {
					t.Fatalf("drain %q answered %d, draining %v", value, w.Code, now)
				}
			default: // leave too: two jobs run here
				if w.Code != http.StatusBadRequest || now != was {
					t.Fatalf("drain %q answered %d, draining %v (was %v)", value, w.Code, now, was)
				}
			}
		case "pages":
			w = a.call(http.MethodGet, "/v1/peer/pages?"+url.Values{"mid": {value}}.Encode(), nil)
			if w.Code != http.StatusNotFound {
				t.Fatalf("pages of %q answered %d with no migration under way", value, w.Code)
			}
		case "ckpt/drop":
			w = a.call(http.MethodPost, "/v1/peer/ckpt/drop?"+url.Values{"id": {string(body)}, "before": {value}}.Encode(), nil)
			fzStatus(t, w, path)
			if _, err := time.Parse(time.RFC3339Nano, value); value != "" && err != nil && w.Code != http.StatusBadRequest {
				t.Fatalf("drop before %q answered %d", value, w.Code)
			}
		case "output":
			w = a.call(http.MethodGet, "/v1/peer/output?"+url.Values{"id": {fzHome}, "out": {value}, "err": {string(body)}, "wait": {"0s"}}.Encode(), nil)
			fzStatus(t, w, path)
			var o api.Output
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &o) != nil {
				t.Fatalf("output from %q answered %d: %s", value, w.Code, w.Body)
			}
			off, _ := strconv.ParseInt(value, 10, 64)
			want := []byte("hello\n")[min(max(off, 0), 6):]
			if !bytes.Equal(o.Stdout, want) || o.StdoutOff != max(off, 0)+int64(len(want)) {
				t.Fatalf("output from %q: %q to %d, want %q", value, o.Stdout, o.StdoutOff, want)
			}
		}
	})
}

// fzQuiet waits, at most five seconds, until no job running here is
// claimed by a migration (a refused one gives its claim back in the
// goroutine that carried it out).
func fzQuiet(t *testing.T, a *fzAgent) bool {
	t.Helper()
	for range 500 {
		refs, _ := a.jobs.Refs()
		busy := slices.ContainsFunc(refs, func(r jobtable.JobRef) bool { return r.Migrating })
		if !busy {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// FuzzPeerFiles: /v1/peer/ckpt/keep keeps a checkpoint file only when its
// seal, META and header hold and it is of the job the query names, as
// that job's one file; /v1/peer/restore restores one only as a job of
// the home its query names, which consented. Neither leaves a file it took
// behind, nor writes outside the checkpoints, the images and the job's
// spool.
func FuzzPeerFiles(f *testing.F) {
	file := fzCheckpoint(f, fzLocal, 1000)
	restore := url.Values{"home": {fzSelf}, "why": {"roam restart"}}.Encode()
	f.Add(false, fzLocal, true, file)
	f.Add(false, fzHome, true, file)
	f.Add(false, "../x.1", true, file)
	f.Add(false, fzLocal, false, file)
	f.Add(true, restore, true, file)
	f.Add(true, restore, true, fzCheckpoint(f, fzHome, 1000))
	f.Add(true, "home=n9&lost=n3&why=x", true, file)
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, restoreRoute bool, query string, seal bool, body []byte) {
		a := pool.get(t)
		store := a.keeper.Dir()
		if err := os.RemoveAll(store); err != nil {
			t.Fatal(err)
		}
		if seal {
			body = fzSeal(a.Agent, body)
		}
		if !restoreRoute {
			w := a.call(http.MethodPost, "/v1/peer/ckpt/keep?"+url.Values{"id": {query}}.Encode(), body)
			fzStatus(t, w, "keep")
			kept := fzKept(t, a)
			if w.Code == http.StatusOK && !seal {
				t.Fatalf("keep of %q took a file this node did not seal", query)
			}
			if (w.Code == http.StatusOK) != kept[query] {
				t.Fatalf("keep of %q answered %d, kept %v", query, w.Code, kept)
			}
			for id := range kept {
				if id != query {
					t.Fatalf("keep of %q kept a file of job %s", query, id)
				}
			}
			fzOnlyIn(t, a.dir, store)
			return
		}
		q, _ := url.ParseQuery(query) // what parses of it, as a URL holds it
		w := a.call(http.MethodPost, "/v1/peer/restore?"+q.Encode(), body)
		if w.Code == http.StatusOK {
			t.Fatalf("restore %q: a job was restored by a node that fails every restore", query)
		}
		for _, s := range a.node.restores {
			if h, _ := migrate.JobHome(s.ID); h != q.Get("home") {
				t.Fatalf("restore %q restored job %s", query, s.ID)
			}
		}
		if len(a.node.restores) > 0 && !seal {
			t.Fatalf("restore %q: an unsealed file was restored", query)
		}
		if kept := fzKept(t, a); len(kept) > 0 {
			t.Fatalf("restore %q left checkpoint files %v", query, kept)
		}
		fzOnlyIn(t, a.dir)
	})
}

// fzKept lists the checkpoint files in a's store, by job id, and fails on
// one that is not a checked file of that job.
func fzKept(t *testing.T, a *fzAgent) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(a.keeper.Dir())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), keeper.Ext)
		if _, home := migrate.JobHome(id); !ok || !home {
			t.Fatalf("file %s left in the checkpoint store", e.Name())
		}
		s, err := a.keeper.Read(filepath.Join(a.keeper.Dir(), e.Name()))
		if err != nil || s.Hdr.ID != id {
			t.Fatalf("checkpoint store holds %s, of job %q: %v", e.Name(), s.Hdr.ID, err)
		}
		kept[id] = true
	}
	return kept
}

// ---- the CLI's socket ----

// fzOwn is a job of A's whose home is this node and that runs here, as
// pid fzOwnPID: FuzzAPI adds it to the pool's jobs, the one job there a
// user may signal. Its sequence number is the largest: a run of the
// pool's job table reaches it only after a restart moved the sequence
// there, and is then refused, as for any id a record holds.
const (
	fzOwn    = "n2.18446744073709551615"
	fzOwnPID = fzPID + 2
	// fzPend is a pending job of A's sweep fzSweep.
	fzPend  = "n2.18446744073709551614"
	fzSweep = "n2:18446744073709551613"
)

// fzCallers ask the socket: A owns the home jobs fzHome and fzLost (and
// fzOwn in FuzzAPI), B owns none, root owns fzOver and the jobs of n1
// running here.
var fzCallers = []Caller{
	{UID: 1000, GID: 1000, PID: 1, Groups: []uint32{1000, 27}},
	{UID: 1002, GID: 1002, PID: 2},
	{UID: 0, GID: 0, PID: 3},
}

var fzAPIRoutes = []string{"run", "kill", "purge", "migrate", "checkpoint", "policy", "drain", "stdin", "output", "events", "ps", "restart", "sweeps"}

// FuzzAPI: every route of the CLI's socket, asked by a user who owns some
// of the node's jobs, by one who owns none, and by root. Whatever the
// body: a job starts only as its caller (uid, gid, groups); a user
// signals, changes and removes no job of another user, loads no policy
// and drains no node; a restart restores only a checkpoint of the
// caller's own (its file sealed by this cluster); and a body that is not
// JSON is a bad request.
func FuzzAPI(f *testing.F) {
	f.Add(uint8(0), uint8(0), "", false, fzJSON(f, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 2}))
	f.Add(uint8(0), uint8(2), "", false, fzJSON(f, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, Stdin: true, On: "n3"}))
	f.Add(uint8(1), uint8(1), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzHome, fzLocal, fzOver}, Signal: 9}))
	f.Add(uint8(1), uint8(0), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzHome}, Signal: 15}))
	f.Add(uint8(1), uint8(0), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzOwn, fzHome}, Signal: 15}))
	f.Add(uint8(1), uint8(1), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzOwn}, Signal: 9}))
	f.Add(uint8(2), uint8(1), "", false, []byte(`{"uid":1000}`))
	f.Add(uint8(2), uint8(0), "", false, []byte(`{"all":true}`))
	f.Add(uint8(3), uint8(1), "", false, fzJSON(f, api.MigrateRequest{ID: fzHome, Node: "n3"}))
	f.Add(uint8(4), uint8(0), "", false, fzJSON(f, api.CheckpointRequest{ID: fzHome, Stop: true}))
	f.Add(uint8(5), uint8(1), "", false, fzJSON(f, api.PolicyRequest{Name: "static"}))
	f.Add(uint8(6), uint8(0), fzSelf, false, []byte(peer.DrainOn))
	f.Add(uint8(7), uint8(0), fzHome, false, []byte("input\n"))
	f.Add(uint8(8), uint8(1), fzHome, false, []byte("0"))
	f.Add(uint8(9), uint8(1), "", false, []byte("2026-01-01T00:00:00Z"))
	f.Add(uint8(10), uint8(0), "", false, []byte("1"))
	f.Add(uint8(11), uint8(0), "", true, fzCheckpoint(f, fzHome, 1000))
	f.Add(uint8(11), uint8(1), "", true, fzCheckpoint(f, fzHome, 1000))
	f.Add(uint8(11), uint8(2), fzSelf, true, fzCheckpoint(f, "n7.3", 0))
	f.Add(uint8(11), uint8(0), "", true, fzCheckpoint(f, "n7.4", 1000))
	f.Add(uint8(0), uint8(0), "", false, fzJSON(f, api.RunRequest{Argv: []string{"/bin/echo", "{}"}, Cwd: "/", Count: 3,
		SweepRequest: api.SweepRequest{Args: []string{"a", "b c", ""}, MaxRunning: 1, Output: "o.%a", Error: "/e.%j"}}))
	f.Add(uint8(0), uint8(0), "", false, fzJSON(f, api.RunRequest{SweepRequest: api.SweepRequest{Rerun: fzSweep}}))
	f.Add(uint8(1), uint8(1), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzSweep, fzOwn}, Signal: 15}))
	f.Add(uint8(1), uint8(0), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzSweep + ":0"}, Signal: 9}))
	f.Add(uint8(1), uint8(0), "", false, fzJSON(f, api.KillRequest{IDs: []string{fzSweep}, Signal: 2}))
	f.Add(uint8(12), uint8(1), fzSweep, false, []byte{})
	f.Add(uint8(12), uint8(0), fzSweep+"[0-3]", false, []byte{})
	pool := newFzPool(f)
	mux := http.NewServeMux()
	var cur *fzAgent
	f.Fuzz(func(t *testing.T, route, who uint8, id string, seal bool, body []byte) {
		a := pool.get(t)
		a.jobs.Seed([]job.Record{{ID: fzOwn, UID: 1000, GID: 1000, User: "u", Argv: []string{"/bin/sleep", "1000"}, Cwd: "/",
			Home: fzSelf, Node: fzSelf, State: job.StateRunning, Started: fzStarted, Group: fzOwn},
			{ID: fzPend, UID: 1000, GID: 1000, User: "u", Argv: []string{"/bin/sleep", "1000"}, Cwd: "/", Home: fzSelf, State: job.StatePending,
				Started: fzStarted, Group: fzPend, Sweep: job.SweepPart{ID: fzSweep, Count: 1, MaxRunning: 1}}},
			[]job.Local{{ID: fzOwn, Home: fzSelf, HomeAddr: a.peers.SelfAddr, UID: 1000, GID: 1000,
				PID: fzOwnPID, StartTix: fzTix, Dir: a.node.SpoolDir(fzOwn), Started: fzStarted}})
		if cur != a {
			// The pool made a new agent: the socket's routes are its own.
			mux = http.NewServeMux()
			a.apiRoutes(mux)
			cur = a
		}
		if err := os.RemoveAll(a.keeper.Dir()); err != nil {
			t.Fatal(err)
		}
		c := fzCallers[int(who)%len(fzCallers)]
		path := fzAPIRoutes[int(route)%len(fzAPIRoutes)]
		if seal {
			body = fzSeal(a.Agent, body)
		}
		others := map[string]job.Record{}
		for jid, r := range a.jobs.Homes() {
			if r.UID != c.UID {
				others[jid] = r
			}
		}
		policy, draining := a.sched.Policy(), a.drain.On()
		var method, target string
		switch path {
		case "run", "kill", "purge", "migrate", "checkpoint", "policy":
			method, target = http.MethodPost, api.Prefix+"/"+path
		case "drain":
			method, target = http.MethodPost, api.Fill(api.PathNodeDrain, id)+"?"+url.Values{"state": {string(body)}}.Encode()
		case "stdin":
			method, target = http.MethodPost, api.Fill(api.PathJobStdin, id)+"?eof="+strconv.Itoa(len(body)%2)
		case "output":
			method, target = http.MethodGet, api.Fill(api.PathJobOutput, id)+"?"+url.Values{"out": {string(body)}, "err": {id}, "wait": {"0s"}}.Encode()
		case "events":
			method, target = http.MethodGet, api.PathEvents+"?"+url.Values{"since": {string(body)}}.Encode()
		case "ps":
			method, target = http.MethodGet, api.PathPS+"?"+url.Values{"all": {string(body)}}.Encode()
		case "restart":
			method, target = http.MethodPost, api.PathRestart+"?"+url.Values{"on": {id}}.Encode()
		case "sweeps":
			method, target = http.MethodGet, api.Fill(api.PathSweep, id)
		}
		req := httptest.NewRequest(method, "http://roam"+target, bytes.NewReader(body))
		req = req.WithContext(httpx.WithCaller(req.Context(), c))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if !fzQuiet(t, a) {
			t.Fatalf("%s by uid %d: a migration runs on after the answer", path, c.UID)
		}

		if v := fzAPIBodies[path]; v != nil && !fzDecode(body, v()) && w.Code != http.StatusBadRequest {
			t.Fatalf("%s by uid %d of %q answered %d", path, c.UID, body, w.Code)
		}
		// What a restore restored: the checkpoint in the body, whatever
		// seal it had (the node checked that before restoring).
		_, _, hdr, _, hdrErr := migrate.ReadCheckpoint(bytes.NewReader(body), a.keeper.Key())
		// A restore runs as the job of the checkpoint's owner, whoever
		// asked: never under another user's record.
		for _, s := range a.node.restores {
			if r, err := a.jobs.HomeRecord(s.ID); hdrErr != nil || err == nil && r.UID != hdr.UID {
				t.Fatalf("restart by uid %d restored job %s of uid %d under a record of uid %v (%v)", c.UID, s.ID, hdr.UID, r.UID, hdrErr)
			}
		}
		for _, s := range a.node.started {
			if s.UID != c.UID || s.GID != c.GID || !reflect.DeepEqual(s.Groups, c.Groups) {
				t.Fatalf("%s by uid %d/%d %v started a job as %d/%d %v", path, c.UID, c.GID, c.Groups, s.UID, s.GID, s.Groups)
			}
		}
		// A kill its caller may send reaches fzOwn, with its signal.
		var kill api.KillRequest
		if path == "kill" && fzDecode(body, &kill) && kill.Signal >= 1 && kill.Signal <= 64 &&
			slices.Contains(kill.IDs, fzOwn) && (c.UID == 0 || c.UID == 1000) &&
			!slices.Contains(a.node.signals, sentSignal{fzOwnPID, syscall.Signal(kill.Signal)}) {
			t.Fatalf("kill by uid %d of %s with %d: signals sent %v", c.UID, fzOwn, kill.Signal, a.node.signals)
		}
		// A kill its caller may send of fzSweep ends its pending job.
		if path == "kill" && fzDecode(body, &kill) && control.EndsUnstarted(kill.Signal) && slices.Contains(kill.IDs, fzSweep) &&
			(c.UID == 0 || c.UID == 1000) {
			if r, _ := a.jobs.HomeRecord(fzPend); r.State != job.StateFinished || r.ExitCode == nil || *r.ExitCode != 128+kill.Signal {
				t.Fatalf("kill by uid %d of %s with %d: its pending job is %s %v", c.UID, fzSweep, kill.Signal, r.State, r.ExitCode)
			}
		}
		if c.UID == 0 {
			return
		}
		if path == "sweeps" && w.Code == http.StatusOK && c.UID != 1000 && strings.HasPrefix(id, fzSweep) {
			t.Fatalf("sweep %s by uid %d answered 200: %s", id, c.UID, w.Body)
		}
		for _, s := range a.node.signals {
			if c.UID != 1000 || s.pid != fzOwnPID {
				t.Fatalf("%s by uid %d signalled pid %d (another user's job) with %d", path, c.UID, s.pid, s.sig)
			}
		}
		// A job of another user's is not read, written to or saved.
		named := id
		if path == "checkpoint" {
			var req api.CheckpointRequest
			_ = json.Unmarshal(body, &req)
			named = req.ID
		}
		if r, ok := others[named]; ok && w.Code == http.StatusOK && (path == "output" || path == "stdin" || path == "checkpoint") {
			t.Fatalf("%s by uid %d of job %s (uid %d) answered 200: %s", path, c.UID, named, r.UID, w.Body)
		}
		for jid, r := range others {
			if now, err := a.jobs.HomeRecord(jid); err != nil || !reflect.DeepEqual(now, r) {
				t.Fatalf("%s by uid %d changed job %s of uid %d: %+v", path, c.UID, jid, r.UID, now)
			}
		}
		if a.sched.Policy() != policy || a.drain.On() != draining {
			t.Fatalf("%s by uid %d changed the node's policy or drain", path, c.UID)
		}
		for _, s := range a.node.restores {
			if hdrErr != nil || hdr.UID != c.UID {
				t.Fatalf("restart by uid %d restored job %s of uid %d (%v)", c.UID, s.ID, hdr.UID, hdrErr)
			}
		}
	})
}

// fzAPIBodies are the JSON bodies of the socket's routes, as each decodes
// its own.
var fzAPIBodies = map[string]func() any{
	"run":        func() any { return new(api.RunRequest) },
	"kill":       func() any { return new(api.KillRequest) },
	"purge":      func() any { return new(api.PurgeRequest) },
	"migrate":    func() any { return new(api.MigrateRequest) },
	"checkpoint": func() any { return new(api.CheckpointRequest) },
	"policy":     func() any { return new(api.PolicyRequest) },
}

// TestReopenDoesNotTakeAnotherJobsID: a restart that needs a new id here
// (its checkpoint is of another job of the same id, another cluster's)
// takes the job table's next sequence number. Found by FuzzAPI: when that
// sequence was behind the records (as a table put back from a copy may
// be), the restart took over the record that held the id, another user's
// ended job, and ran the checkpoint as it. It is refused, and the record
// is left alone; the refused run stays refused (found by
// TestRandomMigrations, seed 1795910577532684335: a late copy of a refused
// request was consented once the job had stopped, for a run that had
// ended).
func TestReopenDoesNotTakeAnotherJobsID(t *testing.T) {
	st, err := job.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.BumpSeq(2); err != nil { // the next new id is n2.3, root's ended job fzOver
		t.Fatal(err)
	}
	a := newFzAgent(t, st)
	before, _ := a.jobs.HomeRecord(fzOver)
	meta := migrate.CheckpointMeta{Version: migrate.CheckpointVersion, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Node: "n3",
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Started: time.Date(2025, 5, 5, 0, 0, 0, 0, time.UTC)}}
	// fzHome's id, but not fzHome (another start time): a new id.
	_, err = a.checkpoints.Reopen(reopen.Request{MID: "00000000000000b1", ID: fzHome, Meta: meta, Owner: asuser.Cred{UID: 1000, GID: 1000}, Why: "roam restart"})
	if err == nil || !strings.Contains(err.Error(), "another job's") {
		t.Fatalf("restart into a taken id: %v, want a refusal naming it", err)
	}
	if now, _ := a.jobs.HomeRecord(fzOver); !reflect.DeepEqual(now, before) {
		t.Fatalf("job %s changed: %+v, was %+v", fzOver, now, before)
	}
	// The refused run is answered once: a late copy of its request, which
	// the sequence now lets through, is refused as ended, and makes no
	// mark (its run took the refusal as its end).
	if _, err := a.checkpoints.Reopen(reopen.Request{MID: "00000000000000b1", ID: fzHome, Meta: meta, Owner: asuser.Cred{UID: 1000, GID: 1000}, Why: "roam restart"}); err == nil || !strings.Contains(err.Error(), "has ended") {
		t.Fatalf("the refused run asking again: %v, want refused as ended", err)
	}
	// The refused id is used up: the next restart gets a new one.
	ans, err := a.checkpoints.Reopen(reopen.Request{MID: "00000000000000b2", ID: fzHome, Meta: meta, Owner: asuser.Cred{UID: 1000, GID: 1000}, Why: "roam restart"})
	if r, rerr := a.jobs.HomeRecord(ans.ID); err != nil || ans.ID == fzOver || ans.ID == fzHome || rerr != nil || r.UID != 1000 {
		t.Fatalf("restart with the sequence past the records: %+v, %v", ans, err)
	}
}

// TestRunDoesNotTakeAnotherJobsID: a run whose new ids a record holds
// already (the job table's sequence behind its records) is refused, and
// the record is not written over; an agent that opens its job table puts
// the sequence past every record it holds.
func TestRunDoesNotTakeAnotherJobsID(t *testing.T) {
	dir := t.TempDir()
	st, err := job.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := newFzAgent(t, st) // holds n2.1 to n2.3 in memory; the sequence is at 0
	before, _ := a.jobs.HomeRecord(fzHome)
	_, err = a.launch.Run(fzCallers[1], api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 2})
	if err == nil || !strings.Contains(err.Error(), "another job's") {
		t.Fatalf("run into a taken id: %v, want a refusal naming it", err)
	}
	if now, _ := a.jobs.HomeRecord(fzHome); !reflect.DeepEqual(now, before) {
		t.Fatalf("job %s changed: %+v, was %+v", fzHome, now, before)
	}
	if len(a.node.started) > 0 {
		t.Fatalf("started %d jobs", len(a.node.started))
	}

	// The job table holds a record past its sequence: openJobs moves the
	// sequence past it.
	if err := st.PutRecords(job.Record{ID: fzSelf + ".40", UID: 1000, Home: fzSelf, State: job.StateFinished}); err != nil {
		t.Fatal(err)
	}
	cfg := a.cfg
	cfg.StateDir = dir
	b := &Agent{cfg: cfg, log: a.log}
	st.Close()
	if err := b.openJobs(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.store.Close() })
	if seq, err := b.store.NextSeqs(1); err != nil || seq != 41 {
		t.Fatalf("after opening a table whose last record is %s.40, the next id is %s.%d (%v)", fzSelf, fzSelf, seq, err)
	}
}
