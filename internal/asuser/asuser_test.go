package asuser

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	got, err := Open(user, []Want{{mine, "rw"}, {root, "r"}, {root, ""}, {link, "r"}, {group, "w"}, {dir, ""}, {filepath.Join(dir, "none"), "r"}})
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
	got, err = Open(Cred{UID: 1001, GID: 1001, Groups: []uint32{5001}}, []Want{{group, "w"}})
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
