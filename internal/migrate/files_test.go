package migrate

import (
	"strings"
	"testing"

	"roam/internal/procfs"
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
	user := procfs.Creds{PID: 7, UIDs: [4]uint32{1001, 1001, 1001, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}, Groups: []uint32{5001, 1001}}
	setuid := user
	setuid.UIDs[1] = 0
	capable := user
	capable.CapEff = 1 << 21
	moreGroups := user
	moreGroups.Groups = []uint32{0, 1001, 5001}
	for _, c := range []struct {
		name  string
		tasks []procfs.Creds
		want  string
	}{
		{"the owner's", []procfs.Creds{user}, ""},
		{"a set-user-id task", []procfs.Creds{user, setuid}, "runs as uids"},
		{"a capability", []procfs.Creds{capable}, "capabilities"},
		{"another group", []procfs.Creds{moreGroups}, "groups"},
	} {
		err := CheckCreds(1001, 1001, []uint32{1001, 5001}, c.tasks)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Root's job may hold capabilities.
	root := procfs.Creds{CapEff: ^uint64(0), CapPrm: ^uint64(0)}
	if err := CheckCreds(0, 0, nil, []procfs.Creds{root}); err != nil {
		t.Errorf("root: %v", err)
	}
}
