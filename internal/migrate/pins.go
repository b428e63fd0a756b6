package migrate

import (
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
)

// What pins a job to its node. The driver reads the job's processes'
// descriptors (/proc/PID/fd) and its TCP table (/proc/PID/net/tcp[6]); the
// rules are here.

// FD is one open descriptor of a job's process: what /proc/PID/fd/N links
// to, and whether it is a character or block device.
type FD struct {
	Link   string
	Device bool
	// Cwd: Link is a process's working directory, not a descriptor.
	Cwd bool
}

// TCPConn is an established TCP connection in the job's network namespace:
// its socket inode and remote address.
type TCPConn struct {
	Inode  string
	Remote string
}

// harmlessDevice are devices every node has and that hold no state.
var harmlessDevice = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/random": true, "/dev/urandom": true}

// Sockets are the socket inodes among fds.
func Sockets(fds []FD) map[string]bool {
	out := map[string]bool{}
	for _, f := range fds {
		if ino, ok := strings.CutPrefix(f.Link, "socket:["); ok {
			out[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return out
}

// Pins lists the regular files a job holds open (which the destination
// must reach; jobDir's own files excepted, they move with the job) and
// says why the job cannot move at all, or "": a deleted file, a device
// other than the harmless ones, a file or working directory outside the
// shared directories (a file of the same name elsewhere is another file),
// an established TCP connection (members are the cluster's addresses, to
// say which kind).
func Pins(fds []FD, conns []TCPConn, jobDir string, members map[string]bool, shared []string) (files []string, reason string) {
	seen := map[string]bool{}
	for _, f := range fds {
		l := f.Link
		// Under /dev only a device is a device: a file in /dev/shm or
		// /dev/mqueue is a file of this node's.
		dev := strings.HasPrefix(l, "/dev/") && f.Device
		if strings.HasPrefix(l, "/") && !strings.HasSuffix(l, " (deleted)") && !dev &&
			!under(l, jobDir) && !Shared(l, shared) {
			what := "holds open " + l
			if f.Cwd {
				what = "works in " + l
			}
			return nil, what + ", on this node's own filesystem (shared directories: " + strings.Join(shared, ", ") + ")"
		}
		switch {
		case strings.HasPrefix(l, "socket:["):
		case strings.HasSuffix(l, " (deleted)"):
			return nil, "holds open a deleted file " + strings.TrimSuffix(l, " (deleted)")
		case dev:
			if !harmlessDevice[l] {
				return nil, "holds open the device " + l
			}
		case strings.HasPrefix(l, "/") && !under(l, jobDir) && !seen[l]:
			seen[l] = true
			files = append(files, l)
		}
	}
	sockets := Sockets(fds)
	for _, c := range conns {
		if !sockets[c.Inode] {
			continue
		}
		where := "outside the cluster"
		if ap, err := netip.ParseAddrPort(c.Remote); err == nil && members[ap.Addr().String()] {
			where = "inside the cluster; its address would change"
		}
		return nil, "holds a TCP connection to " + c.Remote + " (" + where + ")"
	}
	return files, ""
}

// EstablishedTCP parses a /proc/PID/net/tcp or tcp6 table: the established
// connections with their socket inodes and remote addresses.
func EstablishedTCP(table string) []TCPConn {
	var out []TCPConn
	lines := strings.Split(table, "\n")
	if len(lines) > 0 {
		lines = lines[1:]
	}
	for _, line := range lines {
		fs := strings.Fields(line)
		if len(fs) < 10 || fs[3] != "01" {
			continue
		}
		out = append(out, TCPConn{Inode: fs[9], Remote: HexAddr(fs[2])})
	}
	return out
}

// HexAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func HexAddr(s string) string {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return s
	}
	// The kernel prints each 32-bit word in host (little-endian) order.
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return s
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)).String()
}

// under says whether path is dir or inside it.
// Under says whether path is dir or below it.
func Under(path, dir string) bool { return under(path, dir) }

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// SystemDirs hold the operating system's files, taken to be the same on
// every node (the deployment guide asks for one OS install): a job that
// holds a library or a locale file open, or works in /, still moves.
var SystemDirs = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys"}

// Shared says whether path is in one of the shared directories (the
// filesystems every node mounts at the same path) or the system's.
func Shared(path string, shared []string) bool {
	if path == "/" {
		return true
	}
	for _, ds := range [][]string{shared, SystemDirs} {
		for _, d := range ds {
			if under(path, d) {
				return true
			}
		}
	}
	return false
}
