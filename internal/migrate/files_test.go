package migrate

import (
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
