package migrate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

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
	c, err := NewCheckpointPlan(meta, p)
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
	b := sealed(t, key, testMeta(), files)
	if err := VerifySeal(bytes.NewReader(b), int64(len(b)), key); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(io.NewSectionReader(bytes.NewReader(b), 0, int64(len(b))-SealSize))
	m, h, err := ReadCheckpoint(br)
	if err != nil {
		t.Fatal(err)
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

// A checkpoint changed anywhere, sealed with another key (another
// cluster's secret) or cut short is refused by its seal.
func TestCheckpointSeal(t *testing.T) {
	key := []byte("k1")
	b := sealed(t, key, testMeta(), map[string]string{"img/inventory.img": "inv", "spool/stdout": "out"})
	for _, at := range []int{0, 20, len(b) / 2, len(b) - SealSize - 1, len(b) - 1} {
		c := bytes.Clone(b)
		c[at] ^= 1
		if err := VerifySeal(bytes.NewReader(c), int64(len(c)), key); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("byte %d changed: %v", at, err)
		}
	}
	if err := VerifySeal(bytes.NewReader(b), int64(len(b)), []byte("k2")); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("another key: %v", err)
	}
	if err := VerifySeal(bytes.NewReader(b[:len(b)-1]), int64(len(b)-1), key); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("cut short: %v", err)
	}
	if err := VerifySeal(bytes.NewReader(b[:5]), 5, key); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("5 bytes: %v", err)
	}
}

// Each bad META is refused with the field named; so is another format
// version.
func TestCheckpointMetaRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*CheckpointMeta)
		want string
	}{
		"version":   {func(m *CheckpointMeta) { m.Version = 2 }, "format version 2"},
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
	for _, head := range []string{"roam-checkpoint 2\n{}\n", "tar\n", "roam-checkpoint x\n"} {
		if _, _, err := ReadCheckpoint(bufio.NewReader(strings.NewReader(head))); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("%q: %v", head, err)
		}
	}
}

// FuzzReadCheckpoint: whatever bytes follow a valid seal (the seal keeps
// users' bytes out; a bug of ours or a copied file from a newer roam
// could still bring any), ReadCheckpoint returns a META and a header that
// keep their promises, or an error of the format's kinds; never a panic.
func FuzzReadCheckpoint(f *testing.F) {
	meta := testMeta()
	meta.Version = CheckpointVersion
	f.Add(fuzzCheckpointHead(f, meta))
	f.Add([]byte("roam-checkpoint 1\n{\"version\":1}\n"))
	f.Add([]byte("roam-checkpoint 99\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, h, err := ReadCheckpoint(bufio.NewReader(bytes.NewReader(data)))
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
	c, err := NewCheckpointPlan(m, p)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, []byte("k"), nil); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
