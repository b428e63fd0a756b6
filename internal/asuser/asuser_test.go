package asuser

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpen(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: it switches to another user")
	}
	dir, err := os.MkdirTemp("", "roam-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	mine := filepath.Join(dir, "mine")
	root := filepath.Join(dir, "root-only")
	group := filepath.Join(dir, "group")
	link := filepath.Join(dir, "link")
	for _, f := range []struct {
		path     string
		uid, gid int
		mode     os.FileMode
	}{{mine, 1001, 1001, 0o600}, {root, 0, 0, 0o600}, {group, 0, 5001, 0o660}} {
		if err := os.WriteFile(f.path, []byte("x"), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f.path, f.uid, f.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	_ = syscall.Stat(mine, &st)

	user := Cred{UID: 1001, GID: 1001}
	w := func(path, access string) Want { return Want{Path: path, Access: access} }
	got, err := Open(user, []Want{w(mine, "rw"), w(root, "r"), w(root, ""), w(link, "r"), w(group, "w"), w(dir, ""), w(filepath.Join(dir, "none"), "r")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Err != nil || got[0].Ino != st.Ino {
		t.Errorf("own file: %+v, want ino %d", got[0], st.Ino)
	}
	if got[1].Err == nil || !strings.Contains(got[1].Err.Error(), "permission denied") {
		t.Errorf("root's file for reading: %+v", got[1])
	}
	if got[2].Err != nil {
		t.Errorf("root's file looked up only: %+v", got[2])
	}
	if got[3].Err == nil || !strings.Contains(got[3].Err.Error(), "symlink") {
		t.Errorf("through a symlink: %+v", got[3])
	}
	if got[4].Err == nil {
		t.Errorf("a group's file without the group: %+v", got[4])
	}
	if got[5].Err != nil {
		t.Errorf("a directory: %+v", got[5])
	}
	if got[6].Err == nil {
		t.Errorf("a missing file: %+v", got[6])
	}
	// With the group among its supplementary groups, it may write it.
	got, err = Open(Cred{UID: 1001, GID: 1001, Groups: []uint32{5001}}, []Want{w(group, "w")})
	if err != nil || got[0].Err != nil {
		t.Errorf("with the group: %+v %v", got, err)
	}
	// The agent's own credentials are untouched.
	if os.Geteuid() != 0 || os.Getegid() != 0 {
		t.Fatalf("the process is now %d:%d", os.Geteuid(), os.Getegid())
	}
	if _, err := os.ReadFile(root); err != nil {
		t.Fatalf("root cannot read its file any more: %v", err)
	}
}

// The descriptors CRIU's restore takes instead of paths: a regular file
// kept open with the job's access, never a FIFO (which would block) or a
// device (which an open may act on), nor anything through a symlink; and
// a file without a name made as the user in a directory the user may
// write, nowhere else.
func TestOpenKeeps(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: it switches to another user")
	}
	dir, err := os.MkdirTemp("", "roam-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	own := filepath.Join(dir, "own") // the user's directory
	if err := os.Mkdir(own, 0o700); err != nil || os.Chown(own, 1001, 1001) != nil {
		t.Fatal(err)
	}
	file, fifo, dev, linked := filepath.Join(own, "f"), filepath.Join(own, "fifo"), filepath.Join(own, "dev"), filepath.Join(dir, "linked")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil || os.Chown(file, 1001, 1001) != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o666); err != nil || os.Chown(fifo, 1001, 1001) != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", dev); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(own, linked); err != nil {
		t.Fatal(err)
	}
	user := Cred{UID: 1001, GID: 1001}
	got, err := Open(user, []Want{
		{Path: file, Access: "rw", Keep: true},
		{Path: fifo, Access: "r", Keep: true},
		{Path: dev, Access: "r", Keep: true},
		{Path: "/dev/null", Access: "r", Keep: true},
		{Path: own, TmpFile: true},
		{Path: dir, TmpFile: true},    // root's, 0755
		{Path: linked, TmpFile: true}, // the user's, through a symlink
		{Path: file, TmpFile: true},   // not a directory
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, g := range got {
			if g.File != nil {
				g.File.Close()
			}
		}
	}()
	if got[0].Err != nil || got[0].File == nil {
		t.Fatalf("own file kept: %+v", got[0])
	}
	if fl, err := unix.FcntlInt(got[0].File.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDWR || fl&unix.O_NONBLOCK == 0 {
		t.Errorf("kept descriptor's flags %#o %v, want read-write, non-blocking", fl, err)
	}
	for i, want := range map[int]string{1: "not a regular file", 2: "symlink", 3: "not a regular file", 5: "permission denied", 6: "symlink", 7: "not a directory"} {
		if got[i].Err == nil || got[i].File != nil || !strings.Contains(got[i].Err.Error(), want) {
			t.Errorf("want %d: %+v, want %q", i, got[i], want)
		}
	}
	tmp := got[4]
	if tmp.Err != nil || tmp.File == nil {
		t.Fatalf("a file without a name in the user's directory: %+v", tmp)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(tmp.File.Fd()), &st); err != nil || st.Uid != 1001 || st.Nlink != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Fatalf("the file made: %+v %v", st, err)
	}
	if _, err := tmp.File.WriteString("ghost"); err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.File.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(tmp.File); err != nil || string(b) != "ghost" {
		t.Fatalf("read back %q %v", b, err)
	}
	if ents, _ := os.ReadDir(own); len(ents) != 3 {
		t.Fatalf("the user's directory holds %v: the file made has a name", ents)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("root's directory holds %v", ents)
	}
}

// A job's --output file, made or opened for writing as its user: in the
// user's directory it is made, the user's, mode 0600; an existing one
// is not cut; a symlink at the path (even to the user's own file), a
// FIFO, or a directory the user may not write are refused, and nothing
// is made or written through them.
func TestOpenCreates(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: it switches to another user")
	}
	dir, err := os.MkdirTemp("", "roam-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o700); err != nil || os.Chown(own, 1001, 1001) != nil {
		t.Fatal(err)
	}
	made, kept, link, fifo, target := filepath.Join(own, "out.0"), filepath.Join(own, "kept"), filepath.Join(own, "link"), filepath.Join(own, "fifo"), filepath.Join(dir, "roots")
	if err := os.WriteFile(kept, []byte("old data"), 0o600); err != nil || os.Chown(kept, 1001, 1001) != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("root's"), 0o644); err != nil || os.Symlink(target, link) != nil || syscall.Mkfifo(fifo, 0o600) != nil || os.Chown(fifo, 1001, 1001) != nil {
		t.Fatal("setup")
	}
	got, err := Open(Cred{UID: 1001, GID: 1001}, []Want{{Path: made, Create: true}, {Path: kept, Create: true}, {Path: link, Create: true},
		{Path: fifo, Create: true}, {Path: filepath.Join(dir, "in-roots-dir"), Create: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.File != nil {
			g.File.WriteAt([]byte("new"), 0)
			g.File.Close()
		}
	}
	var st syscall.Stat_t
	if got[0].Err != nil || syscall.Stat(made, &st) != nil || st.Uid != 1001 || st.Mode&0o777 != 0o600 {
		t.Errorf("made: %+v, owner %d mode %#o", got[0], st.Uid, st.Mode&0o777)
	}
	if b, _ := os.ReadFile(kept); got[1].Err != nil || string(b) != "new data" {
		t.Errorf("an existing file: %+v, holds %q", got[1], b)
	}
	if b, _ := os.ReadFile(target); got[2].Err == nil || !strings.Contains(got[2].Err.Error(), "symlink") || string(b) != "root's" {
		t.Errorf("through a symlink: %+v, its target holds %q", got[2], b)
	}
	if got[3].Err == nil || got[3].File != nil {
		t.Errorf("a FIFO: %+v", got[3])
	}
	if _, err := os.Stat(filepath.Join(dir, "in-roots-dir")); got[4].Err == nil || err == nil {
		t.Errorf("in root's directory: %+v", got[4])
	}
}
