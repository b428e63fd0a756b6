package ckpt

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/checkpoint-restore/go-criu/v7/stats"
	"google.golang.org/protobuf/proto"
)

// Fuzz targets for mountinfo, whose mount points a job's owner chooses
// (any directory name it can mount on, in its own mount namespace, or a
// user's FUSE mount). scripts/fuzz.sh runs them. Mounts itself reads
// /proc/PID/mountinfo by pid, so only its unescaping is reachable here.

// fuzzMangle escapes a path as the kernel's mountinfo does (show_path,
// mangle " \t\n\\" as octal).
func fuzzMangle(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzUnescape: a mount point the kernel escaped comes back as it was,
// and unescaping never makes a string longer.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"/", "/home/u/my dir", "/a\\b", "/tab\there", "/nl\nx", `/\134040`, `\040`, `\`, `\0`, `\777`, `\08`, "/\xff\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescape(fuzzMangle(s)); got != s {
			t.Fatalf("%q escaped as %q came back as %q", s, fuzzMangle(s), got)
		}
		if got := unescape(s); len(got) > len(s) {
			t.Fatalf("unescape(%q) = %q is longer", s, got)
		}
	})
}

// fuzzFSTypes are filesystem types a table may show, network ones and not.
var fuzzFSTypes = []string{"nfs4", "ext4", "cifs", "tmpfs", "lustre", "fuse.glusterfs", "fuse.sshfs", "9p", "overlay", "ceph"}

// FuzzNetworkMounts: in any table, NetworkMounts lists only the mount
// points of lines whose type is a network filesystem's; and a network
// filesystem's mount point comes back as the path it is (unescaped), a
// local one not at all.
func FuzzNetworkMounts(f *testing.F) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
41 22 0:40 / /home rw,relatime shared:20 - nfs4 fs1:/export/home rw,vers=4.2
43 22 0:42 / /srv/gluster rw,relatime shared:22 - fuse.glusterfs gl:/vol rw`
	f.Add(table, "/home", uint8(0))
	f.Add("", "/srv/data", uint8(2))
	f.Add("1 2 3 4 - nfs\n - nfs x\n1 2 3 / /x - \n1 2 3 / /y shared:1 - - nfs", "/tmp", uint8(1))
	f.Add(table+"\n", "/mnt/ab", uint8(4))
	f.Fuzz(func(t *testing.T, mi, mp string, kind uint8) {
		lines := strings.Split(mi, "\n")
		got := NetworkMounts(mi)
		if len(got) > len(lines) {
			t.Fatalf("%d mount points from %d lines", len(got), len(lines))
		}
		for _, m := range got {
			ok := slices.ContainsFunc(lines, func(l string) bool {
				before, after, found := strings.Cut(l, " - ")
				// The kernel puts one space between fields.
				f, g := strings.Split(before, " "), strings.Split(after, " ")
				return found && len(f) >= 5 && strings.HasPrefix(f[4], "/") && unescape(f[4]) == m && len(g) > 0 && networkFS[g[0]]
			})
			if !ok {
				t.Fatalf("%q is no network mount point of %q", m, mi)
			}
		}
		if !strings.HasPrefix(mp, "/") || strings.ContainsRune(mp, 0) {
			return
		}
		fstype := fuzzFSTypes[int(kind)%len(fuzzFSTypes)]
		line := fmt.Sprintf("41 22 0:40 / %s rw,relatime shared:20 - %s src rw", fuzzMangle(mp), fstype)
		got = NetworkMounts(line)
		if want := networkFS[fstype]; want && (len(got) != 1 || got[0] != mp) || !want && len(got) != 0 {
			t.Fatalf("%q read as %q", line, got)
		}
	})
}

// statsImage is a CRIU statistics image of e, as CRIU writes it.
func statsImage(t testing.TB, e *stats.StatsEntry) []byte {
	b, err := proto.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	h := make([]byte, stats.PayloadOffset)
	binary.LittleEndian.PutUint32(h[stats.PrimaryMagicOffset:], stats.ImgServiceMagic)
	binary.LittleEndian.PutUint32(h[stats.SecondaryMagicOffset:], stats.StatsMagic)
	binary.LittleEndian.PutUint32(h[stats.SizeOffset:], uint32(len(b)))
	return append(h, b...)
}

// FuzzParseStats: a restore's statistics image may be one a peer sent (a
// restore that failed before CRIU wrote its own); whatever it holds, it
// is read without a panic, and what CRIU writes reads back.
func FuzzParseStats(f *testing.F) {
	f.Add(statsImage(f, &stats.StatsEntry{Dump: &stats.DumpStatsEntry{FreezingTime: proto.Uint32(1200), FrozenTime: proto.Uint32(50000),
		MemdumpTime: proto.Uint32(30000), MemwriteTime: proto.Uint32(20000), PagesScanned: proto.Uint64(4096),
		PagesSkippedParent: proto.Uint64(0), PagesWritten: proto.Uint64(4096), PagesLazy: proto.Uint64(0)}}))
	f.Add(statsImage(f, &stats.StatsEntry{Restore: &stats.RestoreStatsEntry{PagesCompared: proto.Uint64(0), PagesSkippedCow: proto.Uint64(0),
		ForkingTime: proto.Uint32(800), RestoreTime: proto.Uint32(40000)}}))
	f.Add([]byte{})
	f.Add(make([]byte, stats.PayloadOffset))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStats(b)
		if err != nil {
			return
		}
		// What parsed is a whole image: its payload re-encodes and
		// parses to the same times.
		again, err := parseStats(statsImage(t, st))
		if err != nil {
			t.Fatalf("%x parsed, but its re-encoding does not: %v", b, err)
		}
		if again.GetDump().GetFrozenTime() != st.GetDump().GetFrozenTime() || again.GetRestore().GetRestoreTime() != st.GetRestore().GetRestoreTime() {
			t.Fatalf("%x: times changed on re-encoding", b)
		}
	})
}
