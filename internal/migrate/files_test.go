package migrate

import (
	"slices"
	"strings"
	"testing"

	"roam/internal/proctext"
)

func TestFileMappings(t *testing.T) {
	maps := `55d0c8a00000-55d0c8a02000 r--p 00000000 fe:00 247026                     /usr/bin/cat
7f1c00000000-7f1c00021000 rw-s 00000000 00:1f 1234                       /shared/data file.bin
7f1c10000000-7f1c10021000 rw-p 00000000 00:00 0 
7f1c20000000-7f1c20001000 rw-s 00000000 00:05 99                         /dev/zero (deleted)
7f1c30000000-7f1c30001000 r--s 00000000 00:1f 55                         /shared/ro
7ffd1e4e2000-7ffd1e503000 rw-p 00000000 00:00 0                          [stack]
`
	got := FileMappings(maps)
	want := []Mapping{
		{"55d0c8a00000-55d0c8a02000", "/usr/bin/cat", false},
		{"7f1c00000000-7f1c00021000", "/shared/data file.bin", true},
		{"7f1c20000000-7f1c20001000", "/dev/zero (deleted)", true}, // the caller looks at its link count
		{"7f1c30000000-7f1c30001000", "/shared/ro", false},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCheckCreds(t *testing.T) {
	user := proctext.Creds{PID: 7, UIDs: [4]uint32{1001, 1001, 1001, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}, Groups: []uint32{5001, 1001}}
	setuid := user
	setuid.UIDs[1] = 0
	capable := user
	capable.CapEff = 1 << 21
	moreGroups := user
	moreGroups.Groups = []uint32{0, 1001, 5001}
	ambient := user
	ambient.CapAmb = 1 << 12
	inheritable := user
	inheritable.CapInh = 1 << 1
	// roam-init -U: root of the job's own user namespace, every
	// capability there, its groups the agent's.
	init := proctext.Creds{PID: 1, Groups: []uint32{0}, CapEff: ^uint64(0), CapPrm: ^uint64(0), JobInit: true}
	// Root, but not the job's roam-init in its own namespace: a task of
	// the tree that became root, or a roam-init in the host's namespace.
	notInit := init
	notInit.JobInit = false
	initAsUser := user
	initAsUser.JobInit = true
	initAsUser.CapEff = 1 << 21
	// A zombie CRIU restored (a child of the job's shell that had exited
	// at the freeze): its ids are CRIU's restorer's, root of the job's
	// namespace; it runs nothing.
	zombie := notInit
	zombie.PID, zombie.Zombie = 9, true
	for _, c := range []struct {
		name  string
		tasks []proctext.Creds
		want  string
	}{
		{"the owner's", []proctext.Creds{user}, ""},
		{"a set-user-id task", []proctext.Creds{user, setuid}, "runs as uids"},
		{"a capability", []proctext.Creds{capable}, "capabilities"},
		{"another group", []proctext.Creds{moreGroups}, "groups"},
		{"an ambient capability (kept across exec)", []proctext.Creds{ambient}, "ambient 1000"},
		{"an inheritable capability", []proctext.Creds{inheritable}, "inheritable 2"},
		{"roam-init, root of the job's user namespace", []proctext.Creds{init, user}, ""},
		{"root, not the job's roam-init", []proctext.Creds{notInit, user}, "runs as uids [0 0 0 0]"},
		{"the job's roam-init as the user is checked as the user", []proctext.Creds{initAsUser, user}, "capabilities"},
		{"a zombie restored as root of the job's namespace", []proctext.Creds{init, user, zombie}, ""},
	} {
		err := CheckCreds(1001, 1001, []uint32{1001, 5001}, c.tasks)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Root's job may hold capabilities.
	root := proctext.Creds{CapEff: ^uint64(0), CapPrm: ^uint64(0)}
	if err := CheckCreds(0, 0, nil, []proctext.Creds{root}); err != nil {
		t.Errorf("root: %v", err)
	}
}

// A restored job's files must be those the destination's check found:
// the same identity at a checked path; a file in a shared directory the
// check never saw (where a symlink swapped in after the check led CRIU)
// is refused; a node-local file it never saw is left for a check now.
func TestRestoredFiles(t *testing.T) {
	f := func(p string, ino uint64, same bool) OpenFile {
		return OpenFile{Path: p, FSID: [2]int32{7, 1}, Ino: ino, Same: same}
	}
	checked := map[string]OpenFile{
		"/shared/u/f":   f("/shared/u/f", 10, true),
		"/usr/lib/x.so": f("/usr/lib/x.so", 20, false),
	}
	later, err := RestoredFiles(checked, []OpenFile{f("/shared/u/f", 10, true), f("/usr/lib/x.so", 20, false), f("/usr/bin/sleep", 30, false)})
	if err != nil || len(later) != 1 || later[0].Path != "/usr/bin/sleep" {
		t.Fatalf("the checked files and a later node-local one: %v %v, want /usr/bin/sleep to check now", later, err)
	}
	for _, tc := range []struct {
		restored OpenFile
		want     string
	}{
		{f("/shared/u/f", 11, true), "not the file the check found"},         // renamed over the path
		{f("/usr/lib/x.so", 21, false), "not the file the check found"},      // a node-local path swapped too
		{f("/shared/victim", 40, true), "the check did not cover"},           // a symlink's target
		{OpenFile{Path: "/shared/u/f", Ino: 10, Same: true}, "not the file"}, // another filesystem
	} {
		if _, err := RestoredFiles(checked, []OpenFile{tc.restored}); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.restored.Path) {
			t.Errorf("restored %+v: %v, want an error naming the path with %q", tc.restored, err, tc.want)
		}
	}
	if later, err := RestoredFiles(nil, nil); err != nil || later != nil {
		t.Fatalf("no files: %v %v", later, err)
	}
	// A file handed to CRIU as the descriptor the check opened is that
	// file, renamed since or not; a directory at a checked path is
	// compared as before.
	handed := f("/shared/u/g", 50, true)
	handed.Key, handed.Access = ExtKey(0x1b, 50), "w"
	wd := f("/shared/u", 2, true)
	checked = map[string]OpenFile{handed.Path: handed, wd.Path: wd}
	renamed := f("/shared/u/g.aside", 50, true)
	renamed.Access = "w"
	if later, err := RestoredFiles(checked, []OpenFile{renamed, wd}); err != nil || later != nil {
		t.Fatalf("a handed file renamed since: %v %v", later, err)
	}
	if _, err := RestoredFiles(checked, []OpenFile{f("/shared/u", 3, true)}); err == nil || !strings.Contains(err.Error(), "not the file the check found") {
		t.Fatalf("a working directory swapped: %v", err)
	}
	made := OpenFile{Path: "/shared/u/#123", Access: "rw", Key: ExtKey(0x1b, 123), Deleted: true, Mode: 0o600}
	if later, err := RestoredFiles(checked, []OpenFile{made}); err != nil || later != nil {
		t.Fatalf("a deleted file made for the restore: %v %v", later, err)
	}
	asDir := f("/shared/u/d", 50, true) // the same inode as the handed file, held as a directory: not taken
	if _, err := RestoredFiles(checked, []OpenFile{asDir}); err == nil {
		t.Fatal("a directory at an unchecked path passed as a handed file")
	}
}

// The frozen job's files the destination's check did not cover: one
// opened since, one now held otherwise (for writing too), one that is
// another file at a checked path; not those the check listed as they are.
func TestLateFiles(t *testing.T) {
	f := func(p string, ino uint64, access string) OpenFile {
		return OpenFile{Path: p, Access: access, FSID: [2]int32{7, 1}, Ino: ino, Same: true}
	}
	checked := []OpenFile{f("/s/a", 1, "r"), f("/s/b", 2, "r"), f("/s/c", 3, "w")}
	frozen := []OpenFile{f("/s/a", 1, "r"), f("/s/b", 2, "rw"), f("/s/c", 9, "w"), f("/etc/passwd", 4, "r")}
	late := LateFiles(checked, frozen)
	var got []string
	for _, l := range late {
		got = append(got, l.Path)
	}
	if strings.Join(got, " ") != "/s/b /s/c /etc/passwd" {
		t.Fatalf("late files %v", got)
	}
	if late := LateFiles(checked, checked[:2]); len(late) != 0 {
		t.Fatalf("a file closed since is no late file: %v", late)
	}
	// Held on another mount since (another key), or deleted since: late.
	keyed := f("/s/a", 1, "r")
	keyed.Key = ExtKey(0x1b, 1)
	moved, gone := keyed, keyed
	moved.Key = ExtKey(0x1c, 1)
	gone.Deleted, gone.Access = true, "rw"
	if late := LateFiles([]OpenFile{keyed}, []OpenFile{keyed, moved, gone}); len(late) != 2 || late[0] != moved || late[1] != gone {
		t.Fatalf("late keyed files %+v", late)
	}
}

// The keys of a job's regular files go onto the files Judge listed, one
// key a path; the program, which no mapping named, and the deleted files
// are added; a path held as two files is refused.
func TestWithKeys(t *testing.T) {
	files := []OpenFile{
		{Path: "/shared/u", FSID: [2]int32{7, 1}, Ino: 2, Same: true}, // the working directory
		{Path: "/shared/u/f", Access: "w", FSID: [2]int32{7, 1}, Ino: 10, Same: true},
		{Path: "/usr/lib/libc.so.6", Access: "r", FSID: [2]int32{8, 1}, Ino: 20},
	}
	ext := []External{
		{Key: ExtKey(0x1b, 10), Path: "/shared/u/f", FSID: [2]int32{7, 1}, Ino: 10, Mode: 0o100644},
		{Key: ExtKey(0x1a, 20), Path: "/usr/lib/libc.so.6", FSID: [2]int32{8, 1}, Ino: 20, Mode: 0o100755},
		{Key: ExtKey(0x1a, 30), Path: "/opt/bin/prog", FSID: [2]int32{8, 1}, Ino: 30, Mode: 0o100755},
		{Key: ExtKey(0x1b, 40), Path: "/shared/u/tmp", Deleted: true, Mode: 0o100640, Size: 5},
	}
	got, err := WithKeys(files, ext, []string{"/shared"})
	if err != nil {
		t.Fatal(err)
	}
	want := []OpenFile{
		files[0],
		{Path: "/shared/u/f", Access: "w", FSID: [2]int32{7, 1}, Ino: 10, Same: true, Key: "file[1b:a]"},
		{Path: "/usr/lib/libc.so.6", Access: "r", FSID: [2]int32{8, 1}, Ino: 20, Key: "file[1a:14]"},
		{Path: "/shared/u/tmp", Access: "rw", Key: "file[1b:28]", Deleted: true, Mode: 0o640, Size: 5},
		{Path: "/opt/bin/prog", Access: "r", FSID: [2]int32{8, 1}, Ino: 30, Same: true, Key: "file[1a:1e]"},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing %+v in %+v", w, got)
		}
		if err := w.Validate(); err != nil {
			t.Errorf("%+v: %v", w, err)
		}
	}
	if files[1].Key != "" {
		t.Fatal("WithKeys changed its argument")
	}
	other := ext[0]
	other.Ino = 11
	if _, err := WithKeys(files, []External{other}, nil); err == nil || !strings.Contains(err.Error(), "two files at /shared/u/f") {
		t.Fatalf("two files at one path: %v", err)
	}
	// One file on two mounts: listed once a key.
	twice := ext[1]
	twice.Key = ExtKey(0x30, 20)
	got, err = WithKeys(files, []External{ext[1], twice}, nil)
	if err != nil || len(got) != 4 || got[2].Key != "file[1a:14]" || got[3].Key != "file[30:14]" || got[3].Path != got[2].Path || got[3].Ino != 20 {
		t.Fatalf("one file on two mounts: %+v %v", got, err)
	}
	if g := GhostImage(ExtKey(0x1b, 40)); g != "roam-ghost-1b-28" {
		t.Fatalf("GhostImage %q", g)
	}
}

// What a destination takes of a file's key, deletion and mode from the
// network.
func TestOpenFileValidate(t *testing.T) {
	for _, f := range []OpenFile{
		{Path: "/a", Access: "r", Key: "file[1b:a]x"},
		{Path: "/a", Access: "r", Key: "file[1b:a]\n--external"},
		{Path: "/a", Key: "file[1b:a]"}, // a key and no access
		{Path: "/a", Access: "r", Key: "file[1b:a]", Deleted: true},
		{Path: "/a", Access: "rw", Deleted: true},
		{Path: "/a", Access: "rw", Key: "file[1b:a]", Deleted: true, Mode: 0o4755},
		{Path: "/a", Access: "rw", Key: "file[1b:a]", Deleted: true, Size: -1},
	} {
		if err := f.Validate(); err == nil {
			t.Errorf("%+v: valid", f)
		}
	}
}

// A checkpoint goes to the job's owner: a task of another user's
// credentials or, in a user's job, a non-dumpable one other than the
// job's init refuses it, naming the task; root's job may hold any.
func TestCheckCheckpointable(t *testing.T) {
	user := proctext.Creds{PID: 9, UIDs: [4]uint32{70001, 70001, 70001, 70001}, GIDs: [4]uint32{70001, 70001, 70001, 70001}, Groups: []uint32{70002}}
	noDump, initNoDump, setuid := user, user, user
	noDump.NoDump = true
	initNoDump.PID, initNoDump.NoDump = 1, true
	setuid.UIDs[1] = 0
	for _, c := range []struct {
		name  string
		tasks []proctext.Creds
		want  string
	}{
		{"the owner's", []proctext.Creds{user}, ""},
		{"the init non-dumpable", []proctext.Creds{initNoDump, user}, ""},
		{"a non-dumpable task", []proctext.Creds{initNoDump, noDump}, "task 9 of user 70001 is not dumpable"},
		{"a set-user-id task", []proctext.Creds{user, setuid}, "task 9 runs as uids [70001 0 70001 70001]"},
	} {
		err := CheckCheckpointable(70001, 70001, []uint32{70002}, 1, c.tasks)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	root := proctext.Creds{PID: 9, NoDump: true, CapEff: ^uint64(0)}
	if err := CheckCheckpointable(0, 0, nil, 1, []proctext.Creds{root}); err != nil {
		t.Errorf("root's job: %v", err)
	}
}
