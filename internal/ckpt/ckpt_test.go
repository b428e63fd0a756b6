package ckpt

import (
	"slices"
	"testing"
)

// The default shared directories are the network and cluster filesystems
// of a recorded mount table, and nothing local.
func TestNetworkMounts(t *testing.T) {
	mi := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
41 22 0:40 / /home rw,relatime shared:20 - nfs4 fs1:/export/home rw,vers=4.2
42 22 0:41 / /scratch rw,relatime shared:21 - lustre 10.0.0.1@tcp:/scratch rw
43 22 0:42 / /srv/gluster rw,relatime shared:22 - fuse.glusterfs gl:/vol rw
44 22 0:43 / /proc rw - proc proc rw`
	got := NetworkMounts(mi)
	if want := []string{"/home", "/scratch", "/srv/gluster"}; !slices.Equal(got, want) {
		t.Fatalf("NetworkMounts = %v, want %v", got, want)
	}
}
