package migrate

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/proctext"
	"roam/internal/slurm"
)

// Fuzz targets for what a destination takes from a member: the migration
// stream (its header line and its archive), and for what a source reads
// of a job from /proc (its descriptors' links and its TCP table), which
// the job's owner controls. scripts/fuzz.sh runs them.

// fuzzHeader is a header a source sends.
func fuzzHeader() Header {
	return Header{
		MID: "0123456789abcdef", From: "n2", ID: "n1.42", Home: "n1", HomeAddr: "10.0.0.1:7947",
		AckOut: 1024, AckErr: 7, Mounts: []string{"/home", "/srv/shared data", "/proc/sys/fs/binfmt_misc"},
		UID: 1000, GID: 1000, Groups: []uint32{1000, 27},
		Started: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Moves: 2,
		LastMoved: time.Date(2026, 1, 2, 3, 5, 0, 0, time.FixedZone("", 3600)), StdinKey: "pipe:[12345]", CPUBefore: 42.125,
	}
}

func fuzzHeaderLine(tb testing.TB, h Header) []byte {
	b, err := json.Marshal(h)
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

// fuzzArchive is an archive as Plan.Write makes it.
func fuzzArchive(tb testing.TB, files map[string]string, order ...string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range order {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzRawEntry is one USTAR entry made by hand (tar.Writer refuses to
// write malformed ones): its header block and its padded body.
func fuzzRawEntry(name string, typeflag byte, body string) []byte {
	h := make([]byte, 512)
	copy(h[0:100], name)
	copy(h[100:108], "0000600\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", len(body)))
	copy(h[136:148], "00000000000\x00")
	h[156] = typeflag
	copy(h[257:263], "ustar\x00")
	copy(h[263:265], "00")
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	data := make([]byte, (len(body)+511)/512*512)
	copy(data, body)
	return append(h, data...)
}

// fuzzSafeName says name is one plain directory entry: joined to a
// directory, it names a file directly inside it.
func fuzzSafeName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") &&
		filepath.Join("/root", name) == "/root/"+name
}

var fuzzPipeKey = regexp.MustCompile(`^pipe:\[[0-9]+\]$`)

// checkHeader fails unless h keeps every promise Validate makes
// (docs/security.md): the spool and image paths built from it stay where
// they belong, and no offset or count is negative.
func checkHeader(t *testing.T, h Header) {
	t.Helper()
	if len(h.MID) != 16 || strings.Trim(h.MID, "0123456789abcdef") != "" {
		t.Fatalf("mid %q", h.MID)
	}
	for what, id := range map[string]string{"home": h.Home, "from": h.From, "job id": h.ID, "images": "in-" + h.MID} {
		if !fuzzSafeName(id) || strings.HasPrefix(id, ".") {
			t.Fatalf("%s %q is not one plain name", what, id)
		}
	}
	seq, ok := strings.CutPrefix(h.ID, h.Home+".")
	if !ok || seq == "" || strings.Trim(seq, "0123456789") != "" {
		t.Fatalf("job id %q is not HOME.SEQ with home %q", h.ID, h.Home)
	}
	if _, err := netip.ParseAddrPort(h.HomeAddr); err != nil {
		t.Fatalf("home address %q", h.HomeAddr)
	}
	for _, m := range h.Mounts {
		if !path.IsAbs(m) || path.Clean(m) != m || strings.ContainsAny(m, "[]") {
			t.Fatalf("mount %q", m)
		}
	}
	switch {
	case h.AckOut < 0 || h.AckErr < 0 || h.Moves < 0 || h.Inc < 0:
		t.Fatalf("negative offset or count: %d %d %d %d", h.AckOut, h.AckErr, h.Moves, h.Inc)
	case h.CheckpointEvery != 0 && (h.CheckpointEvery < MinCheckpointEvery || h.CheckpointEvery > MaxCheckpointEvery):
		t.Fatalf("checkpoint interval %v", h.CheckpointEvery)
	case h.Hold != HoldNone && h.Hold != HoldPin && h.Hold != HoldManual:
		t.Fatalf("hold %q", h.Hold)
	case h.Lazy && h.Streamed:
		t.Fatal("lazy and streamed")
	case h.StdinKey != "" && !fuzzPipeKey.MatchString(h.StdinKey):
		t.Fatalf("stdin key %q", h.StdinKey)
	case len(h.Groups) > 65536: // NGROUPS_MAX
		t.Fatalf("%d supplementary groups", len(h.Groups))
	case !(h.CPUBefore >= 0 && h.CPUBefore <= MaxCPUBefore):
		t.Fatalf("cpu time %v", h.CPUBefore)
	case h.LeaseAge < 0 || h.LeaseAge > MaxLeaseAge:
		t.Fatalf("lease age %v", h.LeaseAge)
	case (h.Slurm == "") != (len(h.Within) == 0) || (h.Slurm != "" && slurm.ValidJobID(h.Slurm) != nil):
		t.Fatalf("Slurm job %q with nodes %q", h.Slurm, h.Within)
	}
	for _, n := range h.Within {
		if !fuzzSafeName(n) || strings.HasPrefix(n, ".") {
			t.Fatalf("Slurm job's node %q is not one plain name", n)
		}
	}
}

// FuzzReadHeader: a header line ReadHeader accepts keeps Validate's
// promises and encodes back to itself; the reader is left at the first
// byte after the line (where the archive starts); a refusal is
// ErrBadHeader.
func FuzzReadHeader(f *testing.F) {
	h := fuzzHeader()
	f.Add(fuzzHeaderLine(f, h))
	f.Add(append(fuzzHeaderLine(f, h), fuzzArchive(f, map[string]string{"img/a": "x"}, "img/a")...))
	h2 := Header{MID: "00000000000000aa", From: "b-2.example", ID: "a.1.18446744073709551615", Home: "a.1", HomeAddr: "[fd00::1]:1",
		Lazy: true, Hold: HoldManual}
	f.Add(fuzzHeaderLine(f, h2))
	h3 := h
	h3.Streamed, h3.Hold, h3.Mounts, h3.StdinKey = true, HoldPin, nil, ""
	f.Add(fuzzHeaderLine(f, h3))
	h4 := h
	h4.LeaseAge = MaxLeaseAge + 1 // refused
	f.Add(fuzzHeaderLine(f, h4))
	h5 := h
	h5.Slurm, h5.Within = "7", []string{"n1", "n2"}
	f.Add(fuzzHeaderLine(f, h5))
	for _, s := range []string{
		`{"mid":"0123456789ABCDEF","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"../n1.1","home":"../n1","home_addr":"10.0.0.1:1"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","mounts":["/a/../b"]}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","ack_out":-1}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","lazy":true,"streamed":true}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","hold":"forever"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"host:1"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","stdin_key":"pipe:[1]x"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1"}`,
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","slurm":"7"}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","slurm":"07","within":["n1"]}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","slurm":"7","within":["../n1"]}` + "\n",
		`{"mid":"0123456789abcdef","from":"n2","id":"n1.1","home":"n1","home_addr":"10.0.0.1:1","within":["n1"]}` + "\n",
		"{}\n", "\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(b), 1<<16)
		h, err := ReadHeader(br)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		checkHeader(t, h)
		line := bytes.IndexByte(b, '\n')
		if line < 0 {
			t.Fatal("a header accepted without its newline")
		}
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, b[line+1:]) {
			t.Fatalf("the reader is left at %q, want %q", rest, b[line+1:])
		}
		enc := fuzzHeaderLine(t, h)
		// Encoding can make a header longer than it was read (U+2028 is
		// escaped, '<' too): a sender refuses to send what the
		// destination would refuse to read.
		if len(enc) > MaxHeader {
			if _, err := NewPlan(h, nil); err == nil {
				t.Fatalf("NewPlan takes a header of %d bytes, which ReadHeader refuses", len(enc))
			}
			return
		}
		again, err := ReadHeader(bufio.NewReader(bytes.NewReader(enc)))
		if err != nil {
			t.Fatalf("header %s re-encoded does not read: %v", enc, err)
		}
		if enc2 := fuzzHeaderLine(t, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("header changed on a round trip:\n%s%s", enc, enc2)
		}
	})
}

// FuzzHeaderValidate feeds Validate the fields directly (further than the
// JSON decoder would lead the fuzzer): what it accepts keeps its promises.
func FuzzHeaderValidate(f *testing.F) {
	h := fuzzHeader()
	f.Add(h.MID, h.From, h.ID, h.Home, h.HomeAddr, h.AckOut, h.AckErr, h.Moves, "/home\x00/srv/x", false, false, "", h.StdinKey, 0, int64(0), 0.0)
	f.Add("00000000000000aa", "2", "1.4", "1", "198.18.0.1:7947", int64(0), int64(0), 0, "", true, false, "manual", "", 3, int64(5e9), 12.5)
	f.Add("00000000000000aa", "2", "...1", "..", "198.18.0.1:7947", int64(0), int64(0), 0, "", false, false, "", "", -1, int64(1), -1.0)
	f.Add("00000000000000aa", "2", "a/b.1", "a/b", "198.18.0.1:7947", int64(0), int64(0), 0, "/a/../b", false, true, "pin", "pipe:[]", 0, int64(-5e9), math.NaN())
	f.Add("00000000000000aa", "2", "a.b.c.007", "a.b.c", "[::1%eth0]:80", int64(-1), int64(0), -1, "/", false, false, "", "", 1, int64(1<<62), math.Inf(1))
	f.Add("00000000000000aa", "2", "1.4", "1", "198.18.0.1:7947", int64(0), int64(0), 0, "", false, false, "", "", 0, int64(0), float64(MaxCPUBefore)*2)
	f.Fuzz(func(t *testing.T, mid, from, id, home, homeAddr string, ackOut, ackErr int64, moves int, mounts string, lazy, streamed bool, hold, stdin string, inc int, every int64, cpu float64) {
		h := Header{MID: mid, From: from, ID: id, Home: home, HomeAddr: homeAddr, AckOut: ackOut, AckErr: ackErr, Moves: moves,
			Lazy: lazy, Streamed: streamed, Hold: Hold(hold), StdinKey: stdin, Inc: inc, CheckpointEvery: time.Duration(every), CPUBefore: cpu}
		if mounts != "" {
			h.Mounts = strings.Split(mounts, "\x00")
		}
		if err := h.Validate(); err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		checkHeader(t, h)
		if home, ok := JobHome(h.ID); !ok || home != h.Home {
			t.Fatalf("JobHome(%q) = %q, %v", h.ID, home, ok)
		}
	})
}

// fuzzEntry is one file ReadArchive gave to create.
type fuzzEntry struct {
	dir, name, body string
	fifo            bool
}

// fuzzSink collects a file's bytes, up to a budget shared by the whole
// archive (so a file cannot grow without bound in the test).
type fuzzSink struct {
	buf    bytes.Buffer
	budget *int64
	closed bool
}

var errFuzzBudget = errors.New("more bytes written than the archive holds")

func (s *fuzzSink) Write(p []byte) (int, error) {
	if int64(len(p)) > *s.budget {
		return 0, errFuzzBudget
	}
	*s.budget -= int64(len(p))
	return s.buf.Write(p)
}

func (s *fuzzSink) Close() error { s.closed = true; return nil }

// FuzzReadArchive: ReadArchive creates only files DIR/NAME with DIR img
// or spool and NAME one plain name, in the archive's order, each with the
// entry's bytes, and writes no more bytes than the archive holds; it
// refuses with ErrBadArchive anything else, and stops there.
func FuzzReadArchive(f *testing.F) {
	files := map[string]string{"img/inventory.img": "inv", "img/pages-1.img": strings.Repeat("\x00\x01", 700),
		"img/core-1.img": "", "spool/stdout": "hello\n", "spool/status": "0\n"}
	f.Add(fuzzArchive(f, files, "img/inventory.img", "img/pages-1.img", "img/core-1.img", "spool/stdout", "spool/status"))
	f.Add(fuzzArchive(f, nil))
	for _, bad := range []string{"img/../x", "img/", "img/a/b", "../img/a", "tmp/a", "img/.", "img/..", "img", "/img/a", "img//a", "spool/x\\..\\y"} {
		f.Add(append(fuzzRawEntry(bad, tar.TypeReg, "x"), make([]byte, 1024)...))
	}
	f.Add(append(fuzzRawEntry("img/x", tar.TypeRegA, "old-style"), make([]byte, 1024)...))
	f.Add(append(fuzzRawEntry("img/x", tar.TypeLink, ""), make([]byte, 1024)...))
	f.Add(fuzzRawEntry("img/truncated", tar.TypeReg, "abc")[:600])
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "img/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	_ = tw.WriteHeader(&tar.Header{Name: "img/dir/", Typeflag: tar.TypeDir})
	_ = tw.Close()
	f.Add(buf.Bytes())
	buf.Reset()
	tw = tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "img/" + strings.Repeat("p", 150), Size: 1, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"comment": "x"}})
	_, _ = tw.Write([]byte("p"))
	_ = tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("not a tar archive at all"))
	buf.Reset()
	tw = tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "spool/fifo", Typeflag: tar.TypeFifo, Format: tar.FormatUSTAR})
	_ = tw.WriteHeader(&tar.Header{Name: "img/fifo", Typeflag: tar.TypeFifo, Format: tar.FormatUSTAR})
	_ = tw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		budget := int64(len(b))
		var got []fuzzEntry
		var sinks []*fuzzSink
		err := ReadArchive(bytes.NewReader(b), func(dir, name string, fifo bool) (io.WriteCloser, error) {
			if dir != DirImages && dir != DirSpool {
				t.Fatalf("create in directory %q", dir)
			}
			if !fuzzSafeName(name) {
				t.Fatalf("create %q in %s: not one plain name", name, dir)
			}
			if fifo && dir != DirSpool {
				t.Fatalf("FIFO %q in %s", name, dir)
			}
			got = append(got, fuzzEntry{dir: dir, name: name, fifo: fifo})
			if fifo {
				sinks = append(sinks, nil)
				return nil, nil
			}
			s := &fuzzSink{budget: &budget}
			sinks = append(sinks, s)
			return s, nil
		})
		for i, s := range sinks {
			if s == nil {
				continue
			}
			if !s.closed {
				t.Fatalf("file %s/%s left open", got[i].dir, got[i].name)
			}
			got[i].body = s.buf.String()
		}
		if errors.Is(err, errFuzzBudget) {
			t.Fatalf("an archive of %d bytes wrote more than that into %s/%s", len(b), got[len(got)-1].dir, got[len(got)-1].name)
		}
		// What the archive holds, read on its own.
		tr := tar.NewReader(bytes.NewReader(b))
		for i := 0; ; i++ {
			h, terr := tr.Next()
			if terr != nil {
				if i != len(got) {
					t.Fatalf("%d files created, the archive reads %d entries", len(got), i)
				}
				if terr == io.EOF && err != nil {
					t.Fatalf("a whole archive refused: %v", err)
				}
				if terr != io.EOF && err == nil {
					t.Fatalf("archive error %v not reported", terr)
				}
				return
			}
			if i == len(got) {
				// ReadArchive stopped here: it must have refused the entry.
				if !errors.Is(err, ErrBadArchive) {
					t.Fatalf("stopped at entry %q with %v", h.Name, err)
				}
				return
			}
			body, rerr := io.ReadAll(io.LimitReader(tr, int64(len(b))+1))
			if h.Name != got[i].dir+"/"+got[i].name || (h.Typeflag != tar.TypeReg && !(got[i].fifo && h.Typeflag == tar.TypeFifo)) ||
				(got[i].fifo && (h.Typeflag != tar.TypeFifo || len(body) != 0)) {
				t.Fatalf("entry %q (type %q) created as %s/%s (FIFO %v)", h.Name, h.Typeflag, got[i].dir, got[i].name, got[i].fifo)
			}
			if rerr == nil && string(body) != got[i].body {
				t.Fatalf("%s: wrote %d bytes, the entry has %d", h.Name, len(got[i].body), len(body))
			}
		}
	})
}

// FuzzStreamRoundTrip: a stream Plan writes is exactly Size bytes long
// (the request's Content-Length) and reads back, header and files, as it
// was planned.
func FuzzStreamRoundTrip(f *testing.F) {
	f.Add(uint64(42), "n2", "/home", int64(1024), false, "inventory.img,pages-1.img,stdout", []byte("inventory\x00pages pages pages\x00out\n"))
	f.Add(uint64(0), "b-2.example", "/", int64(0), true, "core-1.img", []byte{})
	f.Add(uint64(18446744073709551615), "x", "/srv/shared data", int64(9223372036854775807), false, "a,a,b", bytes.Repeat([]byte{0xff}, 1500))
	f.Fuzz(func(t *testing.T, seq uint64, from, mount string, ackOut int64, lazy bool, names string, contents []byte) {
		h := fuzzHeader()
		h.ID = h.Home + "." + strconv.FormatUint(seq, 10)
		h.From, h.AckOut, h.Lazy, h.Mounts = from, ackOut, lazy, []string{mount}
		if h.Validate() != nil {
			return
		}
		var files []File
		bodies := map[string][]byte{}
		parts := bytes.Split(contents, []byte{0})
		for i, n := range strings.Split(names, ",") {
			if len(n) > 90 || !fuzzSafeName(n) || strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" || len(files) == 8 {
				return
			}
			dir := DirImages
			if i%3 == 2 {
				dir = DirSpool
			}
			var body []byte
			if i < len(parts) {
				body = parts[i]
			}
			p := fmt.Sprintf("/fuzz/%d", i)
			bodies[p] = body
			files = append(files, File{Name: dir + "/" + n, Path: p, Size: int64(len(body))})
		}
		plan, err := NewPlan(h, files)
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		var stream bytes.Buffer
		err = plan.Write(&stream, func(p string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(bodies[p])), nil })
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		if int64(stream.Len()) != plan.Size() {
			t.Fatalf("the stream is %d bytes, Size says %d", stream.Len(), plan.Size())
		}
		br := bufio.NewReader(&stream)
		got, err := ReadHeader(br)
		if err != nil {
			t.Fatalf("read header: %v", err)
		}
		if a, b := fuzzHeaderLine(t, got), fuzzHeaderLine(t, h); !bytes.Equal(a, b) {
			t.Fatalf("header came back as\n%s want\n%s", a, b)
		}
		var i int
		err = ReadArchive(br, func(dir, name string, fifo bool) (io.WriteCloser, error) {
			if i >= len(files) || dir+"/"+name != files[i].Name || fifo {
				t.Fatalf("file %d came back as %s/%s", i, dir, name)
			}
			c := &fuzzCheck{t: t, want: bodies[files[i].Path], name: files[i].Name}
			i++
			return c, nil
		})
		if err != nil || i != len(files) {
			t.Fatalf("read archive: %d of %d files, %v", i, len(files), err)
		}
	})
}

// fuzzCheck is a file that must receive exactly want.
type fuzzCheck struct {
	t    *testing.T
	want []byte
	got  bytes.Buffer
	name string
}

func (c *fuzzCheck) Write(p []byte) (int, error) { return c.got.Write(p) }

func (c *fuzzCheck) Close() error {
	if !bytes.Equal(c.got.Bytes(), c.want) {
		c.t.Fatalf("%s came back as %d bytes, want %d", c.name, c.got.Len(), len(c.want))
	}
	return nil
}

// fuzzTCPLine is a /proc/net/tcp line for an established (state 1) or
// other socket.
func fuzzTCPLine(i int, local, remote []byte, lport, rport uint16, state byte, inode uint64) string {
	hexAddr := func(a []byte, port uint16) string {
		w := make([]byte, len(a))
		for j := 0; j+4 <= len(a); j += 4 {
			binary.LittleEndian.PutUint32(w[j:], binary.BigEndian.Uint32(a[j:]))
		}
		return strings.ToUpper(hex.EncodeToString(w)) + fmt.Sprintf(":%04X", port)
	}
	return fmt.Sprintf("%4d: %s %s %02X 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 20 4 30 10 -1",
		i, hexAddr(local, lport), hexAddr(remote, rport), state, inode)
}

const fuzzTCPHead = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"

// FuzzEstablishedTCP: a socket the kernel lists comes back with its inode
// and its remote address, for established ones only; and for any table,
// every connection returned has an inode and a remote address of one
// field.
func FuzzEstablishedTCP(f *testing.F) {
	f.Add([]byte{192, 0, 2, 9}, uint16(80), byte(1), uint64(77), fuzzTCPHead+"\n   0: 0100007F:1F90 0900020C:0050 01 0 0 0 0 0 0 77")
	f.Add([]byte{127, 0, 0, 1}, uint16(0), byte(10), uint64(1), "")
	f.Add(netip.MustParseAddr("2001:db8::1").AsSlice(), uint16(65535), byte(1), uint64(18446744073709551615), "x\n a b c 01 e f g h i j\n a b zz:1 01 e f g h i j")
	f.Add(netip.MustParseAddr("::ffff:10.0.0.1").AsSlice(), uint16(7947), byte(1), uint64(0), "\n\n")
	f.Fuzz(func(t *testing.T, remote []byte, port uint16, state byte, inode uint64, junk string) {
		for _, c := range EstablishedTCP(junk) {
			if c.Inode == "" || c.Remote == "" || strings.ContainsAny(c.Inode+c.Remote, " \t\n\v\f\r") {
				t.Fatalf("connection %+v read from %q", c, junk)
			}
		}
		if len(remote) != 4 && len(remote) != 16 {
			return
		}
		local := make([]byte, len(remote))
		table := fuzzTCPHead + "\n" + fuzzTCPLine(0, local, remote, 5000, port, state, inode) + "\n"
		conns := EstablishedTCP(table)
		if state != 1 {
			if len(conns) != 0 {
				t.Fatalf("state %d listed: %+v", state, conns)
			}
			return
		}
		addr, _ := netip.AddrFromSlice(remote)
		want := TCPConn{Inode: strconv.FormatUint(inode, 10), Remote: netip.AddrPortFrom(addr.Unmap(), port).String()}
		if len(conns) != 1 || conns[0] != want {
			t.Fatalf("table\n%s\nread as %+v, want %+v", table, conns, want)
		}
	})
}

// FuzzJudge: what /proc says of a job holds names and contents its owner
// chose (file names, a FIFO, locks). Whatever the view, Judge pins the
// job with no files listed, or lets it move only when every rule holds:
// each file it reaches by path is in its own directory, or in a shared
// (or the system's) directory and listed once for the destination; no
// device but the harmless ones; no deleted file past the ghost limit, nor any of another user than its task's; no
// lock on a file outside its own directory; no named FIFO outside it; no
// SysV segment of the node's IPC namespace; no established TCP connection;
// and the stopped tasks it names are ones /proc showed stopped.
func FuzzJudge(f *testing.F) {
	views, _ := filepath.Glob("testdata/views/*.json")
	for _, v := range views {
		b, err := os.ReadFile(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(64<<20))
	}
	f.Add([]byte(`{"Tasks":[{"PID":1,"FDs":[{"Link":"socket:[9]"}]}],"TCP":[{"Inode":"9","Remote":"10.0.0.2:1"}]}`), int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, ghost int64) {
		var v View
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		r := testRules
		r.GhostLimit = ghost
		got := Judge(v, r)
		if got.Pin != "" {
			if got.Files != nil || got.Stopped != nil || got.Ghosts != 0 {
				t.Fatalf("pinned (%s) with %+v", got.Pin, got)
			}
			return
		}
		listed := map[string]bool{}
		for _, f := range got.Files {
			if listed[f.Path] || !strings.HasPrefix(f.Path, "/") || under(f.Path, r.JobDir) {
				t.Fatalf("file %+v listed (files %+v)", f, got.Files)
			}
			listed[f.Path] = true
		}
		sockets := map[string]bool{}
		stopped := map[int]bool{}
		for _, task := range v.Tasks {
			st := statusFields(task.Status)
			if tp := st["TracerPid"]; tp != "" && tp != "0" {
				t.Fatalf("moves a traced task: %q", task.Status)
			}
			if strings.HasPrefix(st["State"], "T") {
				if n, ok := proctext.ParseNSPid(task.Status); ok {
					stopped[n] = true
				}
			}
			entries := append([]Entry{}, task.FDs...)
			if task.Cwd.Mode != 0 {
				entries = append(entries, task.Cwd)
			}
			for _, e := range entries {
				l := e.Link
				if e.StatErr != "" {
					t.Fatalf("moves with %q, which could not be examined", l)
				}
				if strings.HasPrefix(l, "socket:[") {
					sockets[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
				}
				if !strings.HasPrefix(l, "/") || e.Mode == 0 {
					continue
				}
				if strings.Contains(e.Info, "\nlock:") || strings.HasPrefix(e.Info, "lock:") {
					if !under(l, r.JobDir) {
						t.Fatalf("moves with a lock on %q", l)
					}
				}
				switch kind := e.Mode & modeType; {
				case kind == modeChr || kind == modeBlk:
					if !harmlessDevice[l] {
						t.Fatalf("moves with the device %q", l)
					}
				case kind == modeFIFO:
					if !under(l, r.JobDir) {
						t.Fatalf("moves with the FIFO %q", l)
					}
				case kind == modeSock:
					t.Fatalf("moves with the socket %q", l)
				case e.Nlink == 0 && kind == modeReg:
					if !strings.HasPrefix(l, "/memfd:") && max(e.Alloc, e.Size) > ghost {
						t.Fatalf("moves with the deleted file %q of %d bytes (%d on disk) over %d", l, e.Size, e.Alloc, ghost)
					}
					// It is made again as its owner: the task's own.
					if uids := strings.Fields(st["Uid"]); !strings.HasPrefix(l, "/memfd:") && (len(uids) == 0 || uids[0] != strconv.FormatUint(uint64(e.UID), 10)) {
						t.Fatalf("a task of uids %v moves with the deleted file %q of uid %d", uids, l, e.UID)
					}
					// It is made again in its directory: one that was
					// there when the job was judged.
					if d := v.Dirs[path.Dir(trimDeleted(l))]; !strings.HasPrefix(l, "/memfd:") && !under(l, r.JobDir) && (d.Mode&modeType != modeDir || d.Nlink == 0) {
						t.Fatalf("moves with the deleted file %q, its directory %+v", l, d)
					}
				case e.Nlink == 0:
					t.Fatalf("moves with the removed %q", l)
				case under(l, r.JobDir):
				case !Shared(l, r.Shared) || !listed[l]:
					t.Fatalf("moves with %q, neither shared nor listed (files %+v)", l, got.Files)
				}
			}
			for _, m := range task.Maps {
				if m.StatErr != "" {
					t.Fatalf("moves with the mapping %q, which could not be examined", m.Path)
				}
				if strings.HasPrefix(m.Path, "/SYSV") && strings.HasSuffix(m.Path, " (deleted)") && !v.OwnIPC {
					t.Fatalf("moves with the node's SysV segment %q", m.Path)
				}
			}
		}
		for _, c := range v.TCP {
			if sockets[c.Inode] {
				t.Fatalf("moves with an established connection %+v", c)
			}
		}
		for _, p := range got.Stopped {
			if !stopped[p] {
				t.Fatalf("stopped %v, but /proc showed %v", got.Stopped, stopped)
			}
		}
	})
}

// fuzzMapsLine is a /proc/PID/maps line as the kernel writes it: the
// path, when there is one, from column 74 (73 on a 64-bit kernel, and one
// space).
func fuzzMapsLine(start, end uint64, perms string, off uint64, inode uint64, path string) string {
	l := fmt.Sprintf("%08x-%08x %s %08x fd:01 %d ", start, end, perms, off, inode)
	if path != "" {
		l += strings.Repeat(" ", max(0, 73-len(l))) + path
	}
	return l
}

// FuzzFileMappings: /proc/PID/maps names files the job's owner chose.
// A mapping of a file comes back once with its path as the kernel shows
// it (" (deleted)" included: a live file may be named so, and the caller
// tells them apart by the link count), its range and whether it is shared
// and writable; an anonymous mapping not at all; and from any text, a
// mapping's path is an absolute path on one line. (A path with a newline, which the kernel
// writes as \012, is left out of the first: it comes back escaped, and
// the destination's check of that path then fails.)
func FuzzFileMappings(f *testing.F) {
	maps := strings.Join([]string{
		fuzzMapsLine(0x400000, 0x452000, "r-xp", 0, 1234, "/usr/bin/python3.11"),
		fuzzMapsLine(0x7f0000000000, 0x7f0000001000, "rw-s", 0x1000, 99, "/home/u/shared data.bin"),
		fuzzMapsLine(0x7f0000002000, 0x7f0000003000, "rw-p", 0, 0, "[heap]"),
		fuzzMapsLine(0x7f0000004000, 0x7f0000005000, "rw-p", 0, 0, ""),
		fuzzMapsLine(0x7f0000006000, 0x7f0000007000, "r--p", 0, 7, "/tmp/gone (deleted)"),
	}, "\n") + "\n"
	f.Add(maps, uint64(0x7f0000000000), uint64(0x7f0000001000), uint8(0b1011), "/home/u/x", false)
	f.Add("", uint64(0), uint64(0xffffffffffffffff), uint8(0), "/", false)
	f.Add("x y z w v /a\n1-2 rwxs 0 0 0 /b /c", uint64(1), uint64(2), uint8(0b1111), "/a b/ c", true)
	f.Add("00400000-00452000 r-xp 00000000 fd:01 1234 /usr/bin/x (deleted) (deleted)", uint64(1), uint64(2), uint8(0b0101), "/tmp/lib.so", true)
	f.Fuzz(func(t *testing.T, text string, start, end uint64, bits uint8, path string, deleted bool) {
		for _, m := range FileMappings(text) {
			if !strings.HasPrefix(m.Path, "/") || strings.Contains(m.Path, "\n") ||
				!strings.Contains(text, m.Range) || strings.ContainsAny(m.Range, " \t\n") {
				t.Fatalf("mapping %+v read from %q", m, text)
			}
		}
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "\n") {
			return
		}
		perms := []byte("----")
		for i, c := range "rwxs" {
			if bits&(1<<(3-i)) != 0 {
				perms[i] = byte(c)
			} else if i == 3 {
				perms[i] = 'p'
			}
		}
		shown := path
		if deleted {
			shown += " (deleted)"
		}
		line := fuzzMapsLine(start, end, string(perms), 0, 42, shown)
		got := FileMappings(line + "\n" + fuzzMapsLine(1, 2, "rw-p", 0, 0, "[stack]"))
		want := Mapping{Range: fmt.Sprintf("%08x-%08x", start, end), Path: shown, SharedWrite: perms[1] == 'w' && perms[3] == 's'}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("%q read as %+v, want %+v", line, got, want)
		}
	})
}
