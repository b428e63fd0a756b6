package migrate

import (
	"fmt"
	"regexp"
	"strings"
)

// A job's regular files go to CRIU as descriptors, never as paths. CRIU
// 4.2 takes a file declared external at the dump (`--external
// file[MNT:INO]`, the mount's id as the dumped task sees it and the inode)
// by that name alone, without looking its path up or copying a deleted
// file into the images; its restore then reopens the descriptor handed in
// under that name (`--inherit-fd`) through /proc, with the dumped flags,
// for every descriptor, mapping and program link of that file. So a
// destination that hands CRIU the descriptors its check opened as the
// job's owner leaves nothing for a user to swap between the check and the
// restore, and CRIU opens no path of the user's as root (docs/criu-files.md
// has the experiments). Directories stay paths: a directory descriptor
// from outside the job's mount namespace would let the job walk ".." out
// of it.

// extKeyPattern is an ExtKey.
var extKeyPattern = regexp.MustCompile(`^file\[[0-9a-f]{1,8}:[0-9a-f]{1,16}\]$`)

// ExtKey is CRIU's name of a regular file it takes as external: the id of
// the mount the task holds it on and its inode, in hex, as
// criu/files-reg.c writes "file[%x:%lx]".
func ExtKey(mntID int, ino uint64) string { return fmt.Sprintf("file[%x:%x]", mntID, ino) }

// GhostImage is the name, in a migration's images directory, of the
// content of the deleted file whose key is key (a valid ExtKey): the
// source writes it there from the frozen job, the stream carries it as
// an image, and the destination copies it into the file it makes.
func GhostImage(key string) string {
	k := strings.TrimSuffix(strings.TrimPrefix(key, "file["), "]")
	return "roam-ghost-" + strings.Replace(k, ":", "-", 1)
}

// External is a regular file of a job as its node reads it from /proc,
// one per CRIU key (a file held through descriptors, mappings and as the
// program alike is one).
type External struct {
	Key  string // ExtKey
	Path string // the file's path, " (deleted)" cut off a deleted file's
	// Deleted: its link count is 0.
	Deleted bool
	FSID    [2]int32
	Ino     uint64
	Mode    uint32 // st_mode
	Size    int64
}

// WithKeys gives the files a job's verdict lists (Judge's Files) the keys
// of the job's external files (ext), and adds those it does not list: a
// program no mapping names, and the deleted files. The result is what the
// destination checks and opens. One file held on two mounts (a library a
// restored task maps from the descriptor its restore was handed, on the
// agent's mount, and a task started since maps from the job's own) is
// listed once a key, each opened on its own. A path held as two files
// (another file put at it since the job opened the first) cannot go to
// CRIU as one descriptor, and is refused.
func WithKeys(files []OpenFile, ext []External, shared []string) ([]OpenFile, error) {
	out := append([]OpenFile(nil), files...)
	at := make(map[string]int, len(out))
	for i, f := range out {
		at[f.Path] = i
	}
	for _, e := range ext {
		if e.Deleted {
			out = append(out, OpenFile{Path: e.Path, Access: "rw", Key: e.Key, Deleted: true, Mode: e.Mode & 0o777, Size: e.Size})
			continue
		}
		i, ok := at[e.Path]
		if !ok {
			at[e.Path] = len(out)
			out = append(out, OpenFile{Path: e.Path, Access: "r", FSID: e.FSID, Ino: e.Ino, Same: Shared(e.Path, shared), Key: e.Key})
			continue
		}
		f := &out[i]
		switch {
		case f.Ino != e.Ino || f.FSID != e.FSID:
			return nil, fmt.Errorf("holds two files at %s (another was put at its path since the job opened it)", quoteOdd(e.Path))
		case f.Key != "" && f.Key != e.Key:
			again := *f
			again.Key = e.Key
			out = append(out, again)
			continue
		case f.Access == "":
			f.Access = "r"
		}
		f.Key = e.Key
	}
	return out, nil
}
