package proctext

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Creds are a task's credentials as /proc/PID/status shows them.
type Creds struct {
	PID    int
	UIDs   [4]uint32 // real, effective, saved, filesystem
	GIDs   [4]uint32
	Groups []uint32
	CapPrm uint64
	CapEff uint64
	// CapInh and CapAmb are the inheritable and ambient sets: an exec
	// can make either permitted (ambient always, inheritable with a
	// program's file capabilities). A kernel without ambient sets gives 0.
	CapInh uint64
	CapAmb uint64
	// NoDump: the task's process is not dumpable (it ran a set-id or
	// unreadable program, or asked so with prctl): the kernel then gives
	// its /proc files to root, not to its effective ids, and its memory
	// may hold what its user cannot read. Not in the status file:
	// procfs.TreeCreds reads it from that file's owner.
	NoDump bool
	// JobInit: the task is the job's roam-init (the root of the tree read)
	// in a user namespace of its own (not the reader's): with -U,
	// roam-init stays root of the job's namespace and only the program
	// runs as the user (cinit/roam-init.c). Not in the status file:
	// procfs.TreeCreds tells it.
	JobInit bool
	// Zombie: the task has exited and waits for its parent (State Z or
	// X). It runs nothing and holds no memory or descriptor; CRIU
	// restores one as a task of its own that exits at once, whose ids are
	// then the restorer's, not the dumped task's.
	Zombie bool
}

// ParseCreds reads the credential lines of a status file.
func ParseCreds(status string) (Creds, error) {
	var c Creds
	seen := 0
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		var err error
		switch k {
		case "State":
			c.Zombie = len(fs) > 0 && (fs[0] == "Z" || fs[0] == "X")
		case "Uid", "Gid":
			if len(fs) != 4 {
				return Creds{}, fmt.Errorf("status: %s: %q", k, v)
			}
			dst := &c.UIDs
			if k == "Gid" {
				dst = &c.GIDs
			}
			for i, f := range fs {
				var n uint64
				if n, err = strconv.ParseUint(f, 10, 32); err != nil {
					return Creds{}, fmt.Errorf("status: %s: %q", k, v)
				}
				dst[i] = uint32(n)
			}
			seen++
		case "Groups":
			for _, f := range fs {
				n, err := strconv.ParseUint(f, 10, 32)
				if err != nil {
					return Creds{}, fmt.Errorf("status: Groups: %q", v)
				}
				c.Groups = append(c.Groups, uint32(n))
			}
		case "CapPrm", "CapEff", "CapInh", "CapAmb":
			if len(fs) != 1 {
				return Creds{}, fmt.Errorf("status: %s: %q", k, v)
			}
			n, err := strconv.ParseUint(fs[0], 16, 64)
			if err != nil {
				return Creds{}, fmt.Errorf("status: %s: %q", k, v)
			}
			switch k {
			case "CapPrm":
				c.CapPrm = n
				seen++
			case "CapEff":
				c.CapEff = n
				seen++
			case "CapInh":
				c.CapInh = n
			default:
				c.CapAmb = n
			}
		}
	}
	if seen != 4 {
		return Creds{}, fmt.Errorf("status: no Uid, Gid, CapPrm or CapEff line")
	}
	slices.Sort(c.Groups)
	return c, nil
}
