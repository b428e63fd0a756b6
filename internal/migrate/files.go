package migrate

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"roam/internal/proctext"
)

// OpenFile is a file a job holds (through a descriptor, as its working
// directory, or mapped, or as its program) that its restore on the
// destination must find there. The destination opens it as the job's
// owner, without following symlinks, and, where it must be the same file
// (Same: in a shared directory), compares its identity with the one the
// source found, before anything is frozen. A regular file (Key set) CRIU
// then takes as the very descriptor the destination opened so; a
// directory (a working directory, a directory descriptor) CRIU still
// reopens by path, as root, and the restored job is checked for it
// (RestoredFiles).
type OpenFile struct {
	Path string `json:"path"`
	// Access is how the job holds it: "r", "w" or "rw" for a regular
	// file; "" for a directory or a file that is only looked up.
	Access string `json:"access,omitempty"`
	// FSID and Ino name the file: statfs's f_fsid (the same on every
	// client of one shared filesystem) and the inode number.
	FSID [2]int32 `json:"fsid"`
	Ino  uint64   `json:"ino"`
	// Same: it must be this very file on the destination. A file outside
	// the shared directories (a mapped library, the program) need only be
	// one its owner may open there.
	Same bool `json:"same,omitempty"`
	// Key is CRIU's name of a regular file in the source's images
	// (ExtKey): the dump took it as external, and the destination hands
	// CRIU the descriptor its check opened under that name. Empty for a
	// directory, which CRIU reopens by path.
	Key string `json:"key,omitempty"`
	// Deleted: the job holds the file deleted, once at Path. The
	// destination makes a new file without a name (O_TMPFILE) in Path's
	// directory, as the owner, with Mode (permission bits) and the
	// content the images carry (GhostImage) of Size bytes, and hands it to
	// CRIU under Key. Nothing else is checked of it: no file of that name
	// exists anywhere.
	Deleted bool   `json:"deleted,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	Size    int64  `json:"size,omitempty"`
}

// MaxOpenFiles bounds a check request's list.
const MaxOpenFiles = 1 << 16

// Validate checks what a destination relies on in an OpenFile from the
// network.
func (f OpenFile) Validate() error {
	switch {
	case len(f.Path) == 0 || f.Path[0] != '/' || path.Clean(f.Path) != f.Path || len(f.Path) > 4096:
		return fmt.Errorf("file path %q is not a clean absolute path", f.Path)
	case f.Access != "" && f.Access != "r" && f.Access != "w" && f.Access != "rw":
		return fmt.Errorf("file %s: access %q", f.Path, f.Access)
	case f.Key != "" && !extKeyPattern.MatchString(f.Key):
		return fmt.Errorf("file %s: key %q", f.Path, f.Key)
	case f.Key != "" && f.Access == "":
		return fmt.Errorf("file %s: a regular file with no access", f.Path)
	case f.Deleted && (f.Key == "" || f.Access != "rw" || f.Same || f.Path == "/"):
		return fmt.Errorf("deleted file %s: key %q, access %q, same %v", f.Path, f.Key, f.Access, f.Same)
	case f.Mode&^0o777 != 0:
		return fmt.Errorf("file %s: mode %#o", f.Path, f.Mode)
	case f.Size < 0:
		return fmt.Errorf("file %s: size %d", f.Path, f.Size)
	}
	return nil
}

// SameFile says whether a file found at f.Path is the one the source
// named: its inode on the same filesystem (a filesystem that gives no id
// is taken by the inode alone).
func (f OpenFile) SameFile(fsid [2]int32, ino uint64) bool {
	if ino != f.Ino {
		return false
	}
	return fsid == f.FSID || (fsid == [2]int32{} && f.FSID == [2]int32{})
}

// RestoredFiles compares the files a restored job holds (restored: Judge's
// Files of the restored tree, as this node sees them) with those this
// node's check found, as the job's owner and without symlinks, before
// anything was frozen (checked: each path with the identity found there).
// A regular file the check handed CRIU as a descriptor (its Key set) is
// in the restored job as that very file, at whatever path it has now (the
// user may have renamed it since): CRIU reopened the descriptor, not the
// path. A directory (a working directory) CRIU reopened by path, as root,
// at the restore, a dump and a transfer later: a path swapped in between
// (a symlink made by another job of the user, another directory renamed
// over it) would give the restored job another one, perhaps one of root's.
// So each other restored file at a checked path must be the very file the
// check found there; one the check did not see (the target a symlink led
// CRIU to) must not be in a shared directory, where it must be the
// source's file and nothing here says which that is. The others are
// returned, for the caller to open as the owner now, without symlinks,
// and to compare.
func RestoredFiles(checked map[string]OpenFile, restored []OpenFile) (later []OpenFile, err error) {
	type id struct {
		fsid [2]int32
		ino  uint64
	}
	handed := map[id]bool{}
	for _, c := range checked {
		if c.Key != "" {
			handed[id{c.FSID, c.Ino}] = true
		}
	}
	for _, r := range restored {
		c, ok := checked[r.Path]
		switch {
		case r.Deleted:
			// No path: a file made as the owner, without a name, for
			// the check (the job's own directory's are not listed).
		case r.Access != "" && handed[id{r.FSID, r.Ino}]:
		case ok && !c.SameFile(r.FSID, r.Ino):
			return nil, fmt.Errorf("the restored job holds %s, which is not the file the check found at that path (swapped after the check)", r.Path)
		case !ok && r.Same:
			return nil, fmt.Errorf("the restored job holds %s, a file in a shared directory the check did not cover", r.Path)
		case !ok:
			later = append(later, r)
		}
	}
	return later, nil
}

// LateFiles are the files of frozen (the frozen job's) that checked (those
// the destination checked before the freeze) does not list, or lists as
// another file, held another way or under another key: the job opened
// them since.
func LateFiles(checked, frozen []OpenFile) []OpenFile {
	have := make(map[OpenFile]bool, len(checked))
	for _, f := range checked {
		have[f] = true
	}
	var late []OpenFile
	for _, f := range frozen {
		if !have[f] {
			late = append(late, f)
		}
	}
	return late
}

// Mapping is a file a process has mapped: its address range as
// /proc/PID/maps and map_files name it, and whether the mapping is shared
// and writable (the job's writes go to the file).
type Mapping struct {
	Range, Path string
	SharedWrite bool
}

// FileMappings parses /proc/PID/maps: the mappings of files, one per
// range (not anonymous ones). A path ending in " (deleted)" may be a
// deleted file or a live one of that name: the caller tells them apart
// (the link count of the map_files entry).
func FileMappings(maps string) []Mapping {
	var out []Mapping
	for _, line := range strings.Split(maps, "\n") {
		// range perms offset dev inode path; the path may hold spaces.
		fs := strings.Fields(line)
		if len(fs) < 6 || len(fs[1]) != 4 {
			continue
		}
		i := strings.Index(line, " /")
		if i < 0 {
			continue
		}
		p := line[i+1:]
		out = append(out, Mapping{Range: fs[0], Path: p, SharedWrite: fs[1][1] == 'w' && fs[1][3] == 's'})
	}
	return out
}

// CheckCreds says how restored tasks' credentials differ from the job's
// owner's: every uid and gid the owner's, the same supplementary groups
// (in any order), and, for a user's job, no capability (effective,
// permitted, inheritable or ambient: an exec makes the last two count). A job's process
// that changed its own credentials (a set-user-id program) fails this:
// the source checks it before it freezes the job (the move is refused,
// and the job is not pinned: such a process may end), and the destination
// again on the restored tasks (the migration fails, and the job runs on
// at the source).
//
// The job's roam-init in a user namespace of its own is root there, by
// design, and is left out (proctext.Creds.JobInit): its uids there are 0,
// whoever owns the job. So are zombies (proctext.Creds.Zombie), which run
// nothing, and which CRIU restores with its own ids.
func CheckCreds(uid, gid uint32, groups []uint32, tasks []proctext.Creds) error {
	want := slices.Sorted(slices.Values(groups))
	for _, c := range tasks {
		if c.JobInit && c.UIDs == [4]uint32{} && c.GIDs == [4]uint32{} || c.Zombie {
			continue
		}
		for i := range 4 {
			if c.UIDs[i] != uid || c.GIDs[i] != gid {
				return fmt.Errorf("task %d runs as uids %v gids %v, the job's owner is %d:%d", c.PID, c.UIDs, c.GIDs, uid, gid)
			}
		}
		if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(c.Groups))), slices.Compact(slices.Clone(want))) {
			return fmt.Errorf("task %d has groups %v, the job's owner %v", c.PID, c.Groups, want)
		}
		if uid != 0 && (c.CapPrm != 0 || c.CapEff != 0 || c.CapInh != 0 || c.CapAmb != 0) {
			return fmt.Errorf("task %d of user %d holds capabilities %x (permitted %x, inheritable %x, ambient %x)", c.PID, uid, c.CapEff, c.CapPrm, c.CapInh, c.CapAmb)
		}
	}
	return nil
}

// CheckReadable says which task of a user's job holds memory its user
// could not read: one that is not dumpable (it ran a set-id or an
// execute-only program, or asked so with prctl). A checkpoint file goes
// to the job's owner, so it is refused for such a task; a migration is
// not (CRIU restores the flag, and the memory goes to no user). The
// job's init (roam-init, pid init) is left out: it makes itself
// non-dumpable so that the user cannot take over its descriptor to the
// agent, and it holds nothing of root's.
func CheckReadable(uid uint32, init int, tasks []proctext.Creds) error {
	if uid == 0 {
		return nil
	}
	for _, c := range tasks {
		if c.NoDump && c.PID != init && !c.Zombie {
			return fmt.Errorf("task %d of user %d is not dumpable (it ran a set-id or unreadable program, or asked so): its memory may hold what the user cannot read", c.PID, uid)
		}
	}
	return nil
}

// CheckCheckpointable judges the tasks of a frozen job (its init's pid
// init) for a checkpoint that goes to the owner uid:gid with groups: an
// error names the task that does not run as the owner (CheckCreds) or is
// not dumpable (CheckReadable).
func CheckCheckpointable(uid, gid uint32, groups []uint32, init int, tasks []proctext.Creds) error {
	if err := CheckCreds(uid, gid, groups, tasks); err != nil {
		return err
	}
	return CheckReadable(uid, init, tasks)
}
