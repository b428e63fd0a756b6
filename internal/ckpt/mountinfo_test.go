package ckpt

import "testing"

// A spool bound in a job's namespace is named by its file system's own
// path; the host shows it below the mount point of that file system: a
// state directory on a tmpfs of its own (an emulated cluster's), on a
// partition of its own, through a bind of a subdirectory, or on the root
// file system, where both are the same.
func TestHostPath(t *testing.T) {
	host := parseMountinfo(`22 1 254:0 / / rw - ext4 /dev/vda rw
40 22 0:55 / /run/roam/clusters/c1 rw - tmpfs roam-cluster rw
41 22 8:3 / /var rw - ext4 /dev/sda3 rw
42 22 8:4 /srv/state /mnt/state rw - xfs /dev/sda4 rw
43 22 8:4 /srv /mnt/srv rw - xfs /dev/sda4 rw
44 22 254:0 /run/netns /run/netns rw - ext4 /dev/vda rw
`)
	for _, c := range []struct{ dev, root, want string }{
		{"0:55", "/n2/spool/1.5", "/run/roam/clusters/c1/n2/spool/1.5"},
		{"8:3", "/lib/roam/spool/1.5", "/var/lib/roam/spool/1.5"},
		{"8:4", "/srv/state/spool/1.5", "/mnt/state/spool/1.5"},
		{"8:4", "/srv/statex/spool/1.5", "/mnt/srv/statex/spool/1.5"},
		{"254:0", "/var/lib/roam/spool/1.5", "/var/lib/roam/spool/1.5"},
		{"254:0", "/run/netnsx/1", "/run/netnsx/1"},
		{"9:9", "/spool/1.5", "/spool/1.5"},
	} {
		if got := hostPath(host, c.dev, c.root); got != c.want {
			t.Errorf("hostPath(%s, %s) = %s, want %s", c.dev, c.root, got, c.want)
		}
	}
}
