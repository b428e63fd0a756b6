package migrate

import (
	"strings"
	"testing"
)

// Each pin rule on recorded descriptor links: a job moves only with its
// files and working directories in the shared directories (or its own
// spool), no deleted file, no device but the harmless ones, no
// established TCP connection.
func TestPins(t *testing.T) {
	shared := []string{"/home", "/srv/shared"}
	cases := []struct {
		name   string
		fds    []FD
		conns  []TCPConn
		files  []string
		reason string
	}{
		{"shared files and cwd move", []FD{{Link: "/home/u", Cwd: true}, {Link: "/home/u/data.csv"}, {Link: "/srv/shared/out"},
			{Link: "/run/roam/job/stdout"}, {Link: "pipe:[123]"}, {Link: "/dev/null", Device: true}},
			nil, []string{"/home/u", "/home/u/data.csv", "/srv/shared/out"}, ""},
		{"the system's files and / move", []FD{{Link: "/", Cwd: true}, {Link: "/usr/lib/locale/C.utf8/LC_IDENTIFICATION"}, {Link: "/etc/passwd"}},
			nil, []string{"/", "/usr/lib/locale/C.utf8/LC_IDENTIFICATION", "/etc/passwd"}, ""},
		{"a file in /tmp pins", []FD{{Link: "/home/u", Cwd: true}, {Link: "/tmp/scratch"}},
			nil, nil, "holds open /tmp/scratch, on this node's own filesystem (shared directories: /home, /srv/shared)"},
		{"a working directory in /var/tmp pins", []FD{{Link: "/var/tmp/run1", Cwd: true}},
			nil, nil, "works in /var/tmp/run1, on this node's own filesystem"},
		{"a prefix is not a directory", []FD{{Link: "/homework/f"}}, nil, nil, "holds open /homework/f"},
		{"a deleted file pins", []FD{{Link: "/home/u/t (deleted)"}}, nil, nil, "holds open a deleted file /home/u/t"},
		{"a device pins", []FD{{Link: "/dev/ttyS0", Device: true}}, nil, nil, "holds open the device /dev/ttyS0"},
		{"a TCP connection pins", []FD{{Link: "socket:[77]"}}, []TCPConn{{Inode: "77", Remote: "192.0.2.9:80"}},
			nil, "holds a TCP connection to 192.0.2.9:80 (outside the cluster)"},
	}
	for _, tc := range cases {
		files, reason := Pins(tc.fds, tc.conns, "/run/roam/job", nil, shared)
		if !strings.HasPrefix(reason, tc.reason) || (tc.reason == "" && reason != "") || strings.Join(files, ",") != strings.Join(tc.files, ",") {
			t.Errorf("%s: files %v, reason %q; want %v, %q", tc.name, files, reason, tc.files, tc.reason)
		}
	}
	// With every directory shared (the emulated cluster), only the other
	// rules are left.
	if _, reason := Pins([]FD{{Link: "/tmp/x"}, {Link: "/tmp", Cwd: true}}, nil, "/run/roam/job", nil, []string{"/"}); reason != "" {
		t.Fatalf("shared /: %s", reason)
	}
}
