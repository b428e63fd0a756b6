package migrate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testBinding() Binding {
	return Binding{Cluster: "c1", UID: 1000, GID: 1000, Groups: []uint32{1000, 27}, User: "alice", Job: "n1.42", Expires: time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC)}
}

func testMeta() CheckpointMeta {
	return CheckpointMeta{
		At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), Node: "n2", Out: 12, Err: 0, FreezeMS: 81.5,
		Files: []OpenFile{{Path: "/srv/shared/x", Access: "w", Ino: 7, Same: true}},
		Job:   CheckpointJob{User: "alice", Argv: []string{"./burn", "8"}, Env: []string{"A=1"}, Cwd: "/srv/shared", Group: "n1.41"},
	}
}

// sealed writes a checkpoint of meta, the header and files, sealed with key.
func sealed(t *testing.T, key []byte, meta CheckpointMeta, files map[string]string) []byte {
	t.Helper()
	var list []File
	for _, n := range []string{"img/inventory.img", "img/pages-1.img", "spool/stdout"} {
		if b, ok := files[n]; ok {
			list = append(list, File{Name: n, Path: n, Size: int64(len(b))})
		}
	}
	h := fuzzHeader()
	h.StdinKey = ""
	p, err := NewPlan(h, list)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCheckpointPlan(testBinding(), meta, p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, key, func(path string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(files[path])), nil }); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != c.Size() {
		t.Fatalf("planned %d bytes, wrote %d", c.Size(), buf.Len())
	}
	return buf.Bytes()
}

func TestCheckpointRoundTrip(t *testing.T) {
	key := []byte("k1")
	files := map[string]string{"img/inventory.img": "inv", "img/pages-1.img": strings.Repeat("p", 3000), "spool/stdout": "hello world\n"}
	files["img/pages-1.img"] = strings.Repeat("p", 3*CheckpointChunk+7) // several chunks
	b := sealed(t, key, testMeta(), files)
	bind, m, h, br, err := ReadCheckpoint(bytes.NewReader(b), key)
	if err != nil {
		t.Fatal(err)
	}
	if want := testBindingAt(m.At, bind.Body); !reflect.DeepEqual(bind, want) {
		t.Fatalf("binding %+v", bind)
	}
	want := testMeta()
	if m.Version != CheckpointVersion || !m.At.Equal(want.At) || m.Node != want.Node || m.Out != want.Out || m.Job.Argv[1] != "8" || len(m.Files) != 1 || m.FreezeMS != want.FreezeMS {
		t.Fatalf("meta %+v", m)
	}
	if h.ID != "n1.42" {
		t.Fatalf("header %+v", h)
	}
	got := map[string]string{}
	err = ReadArchive(br, func(dir, name string, fifo bool) (io.WriteCloser, error) {
		s := &fuzzSink{budget: new(int64)}
		*s.budget = 1 << 20
		return writerFunc{s, func() { got[dir+"/"+name] = s.buf.String() }}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, body := range files {
		if got[n] != body {
			t.Fatalf("%s: %q, want %q", n, got[n], body)
		}
	}
}

type writerFunc struct {
	*fuzzSink
	done func()
}

func (w writerFunc) Close() error { w.done(); return nil }

func testBindingAt(at time.Time, body int64) Binding {
	b := testBinding()
	b.At, b.Body = at, body
	return b
}

// readAll reads a whole checkpoint, its archive included.
func readAll(b, key []byte) error {
	_, _, _, br, err := ReadCheckpoint(bytes.NewReader(b), key)
	if err == nil {
		_, err = io.Copy(io.Discard, br)
	}
	return err
}

// A checkpoint changed anywhere, sealed with another key (another
// cluster's secret) or cut short is refused by its seals; a changed
// chunk is refused when it is read, before the chunks after it are.
func TestCheckpointSeal(t *testing.T) {
	key := []byte("k1")
	b := sealed(t, key, testMeta(), map[string]string{"img/inventory.img": "inv", "img/pages-1.img": strings.Repeat("p", 2*CheckpointChunk),
		"spool/stdout": "out"})
	if err := readAll(b, key); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, 20, 200, len(b) / 2, len(b) - SealSize - 1, len(b) - 1} {
		c := bytes.Clone(b)
		c[at] ^= 1
		if err := readAll(c, key); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("byte %d changed: %v", at, err)
		}
	}
	if err := readAll(b, []byte("k2")); !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "head's seal") {
		t.Fatalf("another key: %v", err)
	}
	for _, n := range []int{len(b) - 1, len(b) - CheckpointChunk, 5} {
		if err := readAll(b[:n], key); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	// The second chunk of another file of the same job: refused by the
	// chain of seals.
	other := sealed(t, key, testMeta(), map[string]string{"img/inventory.img": "inx", "img/pages-1.img": strings.Repeat("p", 2*CheckpointChunk),
		"spool/stdout": "out"})
	c := bytes.Clone(b)
	_, head, _, _ := ReadHead(bufio.NewReader(bytes.NewReader(b)), key)
	second := int(head) + CheckpointChunk + SealSize
	copy(c[second:second+CheckpointChunk+SealSize], other[second:])
	if err := readAll(c, key); !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "chunk 2") {
		t.Fatalf("a chunk of another file: %v", err)
	}
}

// A file of format version 1 (one seal at its end, no binding) is
// refused by its head, saying why; so is another cluster's, and one past
// its expiry.
func TestCheckpointHeadRefused(t *testing.T) {
	v1 := "roam-checkpoint 1\n{\"version\":1}\n"
	_, _, _, err := ReadHead(bufio.NewReader(strings.NewReader(v1)), []byte("k"))
	if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "format version 1") || !strings.Contains(err.Error(), "older roam") {
		t.Fatalf("version 1: %v", err)
	}
	b := testBindingAt(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), 10)
	if err := b.Check("c1", b.Expires); err != nil {
		t.Fatal(err)
	}
	if err := b.Check("c2", b.At); !errors.Is(err, ErrCheckpointExpired) || !strings.Contains(err.Error(), `cluster "c1", this is cluster "c2"`) {
		t.Fatalf("another cluster: %v", err)
	}
	if err := b.Check("c1", b.Expires.Add(time.Second)); !errors.Is(err, ErrCheckpointExpired) || !strings.Contains(err.Error(), "limits.checkpoint_expiry") {
		t.Fatalf("expired: %v", err)
	}
}

// Each bad META is refused with the field named; so is another format
// version.
func TestCheckpointMetaRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*CheckpointMeta)
		want string
	}{
		"version":   {func(m *CheckpointMeta) { m.Version = 3 }, "format version 3"},
		"node":      {func(m *CheckpointMeta) { m.Node = "../x" }, `node "../x"`},
		"offset":    {func(m *CheckpointMeta) { m.Out = -1 }, "negative output offset"},
		"argv":      {func(m *CheckpointMeta) { m.Job.Argv = nil }, "no program"},
		"cwd":       {func(m *CheckpointMeta) { m.Job.Cwd = "rel" }, `working directory "rel"`},
		"group":     {func(m *CheckpointMeta) { m.Job.Group = "../1" }, `group "../1"`},
		"file path": {func(m *CheckpointMeta) { m.Files[0].Path = "/a/../etc" }, "/a/../etc"},
	} {
		t.Run(name, func(t *testing.T) {
			m := testMeta()
			m.Version = CheckpointVersion
			tc.edit(&m)
			err := m.Validate()
			if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	for _, head := range []string{"roam-checkpoint 2\n{}\n", "tar\n", "roam-checkpoint x\n", "roam-checkpoint 3\n"} {
		if _, _, _, err := ReadHead(bufio.NewReader(strings.NewReader(head)), []byte("k")); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("%q: %v", head, err)
		}
	}
}

// FuzzReadCheckpoint: whatever body follows a valid seal (the seals keep
// users' bytes out; a bug of ours or a copied file from a newer roam
// could still bring any), ReadBody returns a META and a header that
// keep their promises, or an error of the format's kinds; never a panic.
func FuzzReadCheckpoint(f *testing.F) {
	meta := testMeta()
	meta.Version = CheckpointVersion
	f.Add(fuzzCheckpointHead(f, meta))
	f.Add([]byte("{\"version\":1}\n"))
	f.Add([]byte("{\"version\":2}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, h, err := ReadBody(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted META fails Validate: %v", err)
		}
		checkHeader(t, h)
		if h.Lazy || h.Streamed {
			t.Fatal("accepted images without pages")
		}
	})
}

func fuzzCheckpointHead(tb testing.TB, m CheckpointMeta) []byte {
	p, err := NewPlan(fuzzHeader(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewCheckpointPlan(testBinding(), m, p)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, []byte("k"), nil); err != nil {
		tb.Fatal(err)
	}
	// The body, joined from its chunks.
	_, _, body, err := ReadHead(bufio.NewReader(&buf), []byte("k"))
	if err != nil {
		tb.Fatal(err)
	}
	out, err := io.ReadAll(body)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
