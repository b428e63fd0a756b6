//go:build !node

package cli

// Huge pages for roam sim. The simulator's nodes and load vectors, some
// 1.3 KB a node, are read at random, an event's node anywhere among
// 100,000: on 4 KB pages nearly every such read also misses the TLB,
// whose 2,048 entries cover 8 MB. The kernel here gives a process huge
// pages (2 MB) only where it asks for them (transparent_hugepage
// "madvise"), and Go's runtime does not ask.

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// hugeMin: mappings smaller than this are left as they are.
const hugeMin = 4 << 20

// hugePages asks for huge pages on the process's large anonymous
// writable mappings (the Go heap the simulation was just built in): the
// pages not yet touched come huge as they are, those touched are
// collapsed into huge ones now (MADV_COLLAPSE). It returns the bytes
// advised; a kernel that refuses changes nothing but the speed.
func hugePages() int64 {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	var total int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(sc.Bytes())
		if len(f) != 5 || !bytes.HasPrefix(f[1], []byte("rw")) {
			continue
		}
		lo, hi, _ := bytes.Cut(f[0], []byte("-"))
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end-start < hugeMin {
			continue
		}
		if madvise(start, end-start, unix.MADV_HUGEPAGE) == nil {
			total += int64(end - start)
			_ = madvise(start, end-start, unix.MADV_COLLAPSE)
		}
	}
	return total
}

func madvise(addr, n uint64, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(addr), uintptr(n), uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
