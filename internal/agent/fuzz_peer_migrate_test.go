package agent

// Fuzz targets of the agent (their harness is fuzz_test.go):
// The peer routes of a migration: the check, the stream, the queries by migration id.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"roam/internal/ckpt"
	"roam/internal/migrate"
)

// ---- peer port: migration ----

// fzCheckWire is a migration check as it travels (migrateCheckRequest),
// read on its own so that what a node said yes to can be looked at.
type fzCheckWire struct {
	MID   string `json:"mid"`
	From  string `json:"from"`
	ID    string `json:"id"`
	Files []struct {
		Path   string `json:"path"`
		Access string `json:"access"`
	} `json:"opened"`
	Owner *struct {
		UID, GID uint32
		Groups   []uint32
	} `json:"owner"`
	Lazy bool `json:"lazy"`
}

// FuzzPeerMigrateCheck: /v1/peer/migrate/check says yes only to a
// migration id, a job id, an owner and clean absolute file paths; and a
// check that fails leaves no migration, page sink or image directory
// behind.
func FuzzPeerMigrateCheck(f *testing.F) {
	for _, s := range []string{
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/"},{"path":"/etc/passwd","access":"r","fsid":[1,2],"ino":3,"same":true}],"owner":{"UID":1000,"GID":1000,"Groups":[1000,27]}}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","owner":{"UID":0,"GID":0}}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.5","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"../../../../tmp","from":"n1","id":"n1.9","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"../n1.9","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"relative"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/a/../etc/shadow","access":"r"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/etc/passwd","access":"x"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","lazy":true}`,
	} {
		f.Add([]byte(s))
	}
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/migrate/check", body)
		var req fzCheckWire
		decoded := fzDecode(body, &req)
		clean := decoded && req.Owner != nil
		for _, f := range req.Files {
			clean = clean && f.Path != "" && filepath.IsAbs(f.Path) && filepath.Clean(f.Path) == f.Path &&
				(f.Access == "" || f.Access == "r" || f.Access == "w" || f.Access == "rw")
		}
		// The node's own failures are 5xx: opening the files as their
		// owner (which takes root) and its page sink (which fails here).
		if w.Code >= 500 && a.node.sinks == 0 && !(clean && len(req.Files) > 0) {
			t.Fatalf("check: status %d: %s", w.Code, w.Body)
		}
		if w.Code == http.StatusOK {
			if !decoded || !migrate.ValidMID(req.MID) || !fzSafeJobID(req.ID) || !clean {
				t.Fatalf("check %q accepted", body)
			}
			return
		}
		in, sinks := len(a.migr.Arrivals()), a.migr.Serving()
		ents, _ := os.ReadDir(a.imageDir)
		if in != 0 || sinks != 0 || len(ents) != 0 {
			t.Fatalf("a refused check left %d migrations, %d sinks, %d image directories", in, sinks, len(ents))
		}
	})
}

// FuzzPeerMigrateStream: /v1/peer/migrate (a member's migration stream,
// header and archive) writes files only directly inside the migration's
// image directory and the job's spool directory, and only once its
// header is valid; what a refused or failed stream wrote is removed.
// (An archive whose entries claim more bytes than the stream holds, a
// sparse file, is left to FuzzReadArchive: here it would fill the disk.)
func FuzzPeerMigrateStream(f *testing.F) {
	h := migrate.Header{MID: "0123456789abcdef", From: "n1", ID: "n1.9", Home: "n1", HomeAddr: "10.0.0.1:7947",
		Mounts: []string{"/home"}, Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	stream := func(h migrate.Header, files map[string]string, order ...string) []byte {
		var buf bytes.Buffer
		buf.Write(fzJSON(f, h))
		buf.WriteByte('\n')
		tw := tar.NewWriter(&buf)
		for _, name := range order {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(files[name])), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
				f.Fatal(err)
			}
			io.WriteString(tw, files[name])
		}
		tw.Close()
		return buf.Bytes()
	}
	files := map[string]string{"img/inventory.img": "inv", "img/pages-1.img": "pages", "spool/stdout": "out\n", "spool/status": ""}
	f.Add(stream(h, files, "img/inventory.img", "img/pages-1.img", "spool/stdout", "spool/status"))
	f.Add(stream(h, files, "img/inventory.img", "img/inventory.img"))
	f.Add(stream(h, map[string]string{"img/../../x": "x"}, "img/../../x"))
	lazy := h
	lazy.Lazy, lazy.StdinKey = true, "pipe:[7]"
	f.Add(stream(lazy, files, "img/inventory.img"))
	streamed := h
	streamed.Streamed = true
	f.Add(stream(streamed, files, "img/inventory.img"))
	bad := h
	bad.ID, bad.Home = "../../n1.9", "../../n1"
	f.Add(stream(bad, files, "spool/stdout"))
	here := h
	here.ID, here.Home = fzLocal, "n1"
	f.Add(stream(here, files, "spool/stdout"))
	f.Add([]byte("{}\n"))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if fzSparse(body) {
			return
		}
		a := pool.get(t)
		var hdr migrate.Header
		if line, _, ok := bytes.Cut(body, []byte("\n")); ok {
			_ = json.Unmarshal(line, &hdr)
		}
		if migrate.ValidMID(hdr.MID) {
			// The next input may use the same id: the ledger forgets it.
			st := a.store
			t.Cleanup(func() { _ = st.DeleteIn(hdr.MID) })
		}
		images := filepath.Join(a.imageDir, "in-"+hdr.MID)
		spool := a.node.SpoolDir(hdr.ID)
		a.node.onRestore = func(s ckpt.RestoreSpec) {
			if s.Dir != images || s.Mounts[ckpt.JobDir] != spool {
				t.Fatalf("restore from %s with spool %s, want %s and %s", s.Dir, s.Mounts[ckpt.JobDir], images, spool)
			}
			fzOnlyIn(t, a.dir, images, spool)
		}
		w := a.call(http.MethodPost, "/v1/peer/migrate", body)
		// A 5xx is this node's failure (its restore always fails).
		if w.Code == http.StatusOK {
			t.Fatalf("a stream was restored by a node that fails every restore: %s", w.Body)
		}
		if len(a.node.restores) > 0 && hdr.Validate() != nil {
			t.Fatalf("restored from a header that is not valid: %+v", hdr)
		}
		fzOnlyIn(t, a.dir)
	})
}

// fzSparse says an archive after the header line has an entry that
// claims more bytes than the stream holds.
func fzSparse(body []byte) bool {
	_, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return false
	}
	tr := tar.NewReader(bufio.NewReader(bytes.NewReader(rest)))
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if h.Size > int64(len(body)) {
			return true
		}
	}
}

// fzOnlyIn fails on a regular file under root that is not directly in
// one of dirs (the agent's job table and the home spool's seeded output
// excepted).
func fzOnlyIn(t *testing.T, root string, dirs ...string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p == filepath.Join(root, "home", fzHome, "stdout") {
			return nil
		}
		for _, dir := range dirs {
			if filepath.Dir(p) == dir {
				return nil
			}
		}
		t.Fatalf("file %s written (allowed: %v)", p, dirs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzPeerQuery: the routes that take a query parameter (a job id or a
// migration id) refuse a malformed id as a bad request and never answer
// with an internal error; releasing a hold frees only a job placed by
// hand, and only the one named.
func FuzzPeerQuery(f *testing.F) {
	for i := range fzQueryRoutes {
		f.Add(uint8(i), fzMID)
		f.Add(uint8(i), fzLocal)
		f.Add(uint8(i), fzHome)
		f.Add(uint8(i), "../../x")
	}
	f.Add(uint8(0), fzPinned)
	f.Add(uint8(7), "2026-01-01T00:00:00Z")
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, route uint8, value string) {
		r := fzQueryRoutes[int(route)%len(fzQueryRoutes)]
		a := pool.get(t)
		w := a.call(r.method, r.path+"?"+url.Values{r.param: {value}}.Encode(), []byte(value))
		fzStatus(t, w, r.path)
		if r.param == "mid" && r.path != "/v1/peer/migrate/sink" && !migrate.ValidMID(value) && w.Code != http.StatusBadRequest {
			t.Fatalf("%s?mid=%q answered %d", r.path, value, w.Code)
		}
		refs, _ := a.jobs.Refs()
		for _, lj := range refs {
			id := lj.Rec.ID
			want := map[string]migrate.Hold{fzLocal: migrate.HoldManual, fzPinned: migrate.HoldPin}[id]
			if r.path == "/v1/peer/hold" && id == fzLocal && value == fzLocal {
				want = migrate.HoldNone
			}
			if lj.Rec.Hold != want {
				t.Fatalf("%s?%s=%q: job %s hold %q, want %q", r.path, r.param, value, id, lj.Rec.Hold, want)
			}
		}
	})
}

var fzQueryRoutes = []struct{ method, path, param string }{
	{http.MethodPost, "/v1/peer/hold", "id"},
	{http.MethodPost, "/v1/peer/migrate/commit", "mid"},
	{http.MethodPost, "/v1/peer/migrate/abort", "mid"},
	{http.MethodGet, "/v1/peer/migrate/outcome", "mid"},
	{http.MethodGet, "/v1/peer/migrate/sink", "mid"},
	{http.MethodGet, "/v1/peer/record", "id"},
	{http.MethodGet, "/v1/peer/output", "id"},
	{http.MethodGet, "/v1/peer/events", "since"},
	{http.MethodPost, "/v1/peer/stdin", "id"},
	{http.MethodPost, "/v1/peer/ckpt/drop", "id"},
}
