package ckpt

// A job's regular files, as CRIU takes them: by key, as descriptors the
// destination opened as the job's owner (see migrate's external.go). The
// dump declares every one of them external, from the tree CRIU holds
// (CRIU's query-ext-files notification, once every task is stopped and
// before any file is dumped), and writes each deleted one's content into
// the images, where CRIU would have made it a ghost file that its
// restore makes again by path, as root.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"roam/internal/migrate"
	"roam/internal/procfs"
)

// extFile is a regular file of a job as CRIU's key names it, and a /proc
// link it is read through: /proc/PID/fd/N, /proc/PID/map_files/RANGE or
// /proc/PID/exe.
type extFile struct {
	migrate.External
	src string
}

// notExternal are the links of files CRIU keeps to itself, whatever they
// are: memfds, shared anonymous memory and SysV segments, which it dumps
// as memory (kept out of the pin rules' deleted files for the same
// reason).
func notExternal(link string) bool {
	return strings.HasPrefix(link, "/memfd:") || strings.HasPrefix(link, "/SYSV") ||
		link == "/dev/zero (deleted)" || strings.HasPrefix(link, "/anon_hugepage")
}

// externals lists the regular files the tree under pid holds through a
// descriptor, a mapping or as a program, one per key: all but those CRIU
// keeps to itself, the job's own /proc (opened again in the restored
// job's /proc), POSIX message queues (which the pin rules refuse) and
// the job's own directory (the spool, root's, which the destination makes
// from the stream and CRIU reopens there). A task that ends, or a
// descriptor closed, while it is read is skipped; still (the tree is
// frozen) makes any other failure an error, which names the file.
func externals(pid int, still bool) ([]extFile, error) {
	var out []extFile
	seen := map[string]bool{}
	for _, p := range procfs.Tree(pid) {
		proc := "/proc/" + strconv.Itoa(p)
		type source struct{ link, info string } // info: the task's fdinfo of a descriptor
		var srcs []source
		ents, _ := os.ReadDir(proc + "/fd")
		for _, e := range ents {
			srcs = append(srcs, source{proc + "/fd/" + e.Name(), proc + "/fdinfo/" + e.Name()})
		}
		// A file mapped in several ranges (a library's text and data) is
		// read once: one path names one file on one mount. Not a
		// deleted one's: two deleted files may have had one name.
		maps, _ := os.ReadFile(proc + "/maps")
		mapped := map[string]bool{}
		for _, m := range migrate.FileMappings(string(maps)) {
			if notExternal(m.Path) || mapped[m.Path] {
				continue
			}
			if !strings.HasSuffix(m.Path, " (deleted)") {
				mapped[m.Path] = true
			}
			srcs = append(srcs, source{link: proc + "/map_files/" + m.Range})
		}
		srcs = append(srcs, source{link: proc + "/exe"})
		for _, src := range srcs {
			f, ok, err := external(src.link, src.info)
			if err != nil {
				if !still || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH) {
					continue
				}
				return nil, err
			}
			if !ok || seen[f.Key] {
				continue
			}
			seen[f.Key] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// external reads the file the /proc link src names, without opening it
// (no FIFO blocks, no device acts): its key, its identity and size; ok is
// false for what is not a regular file CRIU takes as external. The key's
// mount is the one the task's fdinfo names for a descriptor (info), and
// for a mapping or the program the one a descriptor of the agent's own
// holds it on (O_PATH), as CRIU reads them.
func external(src, info string) (extFile, bool, error) {
	link, err := os.Readlink(src)
	if err != nil || !strings.HasPrefix(link, "/") || notExternal(link) {
		return extFile{}, false, nil
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Stat(src, &st); err != nil {
		return extFile{}, false, examine(link, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return extFile{}, false, nil
	}
	if err := unix.Statfs(src, &sfs); err != nil {
		return extFile{}, false, examine(link, err)
	}
	path, ok := takes(link, st.Mode, uint64(st.Nlink), sfs.Type)
	if !ok {
		return extFile{}, false, nil
	}
	var mnt int
	if info != "" {
		mnt, err = fdinfoMount(info)
	} else {
		mnt, err = openedMount(src)
	}
	if err != nil {
		return extFile{}, false, examine(link, err)
	}
	return extFile{src: src, External: migrate.External{Key: migrate.ExtKey(mnt, st.Ino), Path: path, Deleted: st.Nlink == 0,
		FSID: sfs.Fsid.Val, Ino: st.Ino, Mode: st.Mode, Size: st.Size}}, true, nil
}

// examine is the error of a file that cannot be examined.
func examine(link string, err error) error {
	return fmt.Errorf("holds %s, which cannot be examined: %w", link, err)
}

// takes says whether CRIU takes a file as external, from its /proc link
// and what stat and statfs said of it, and its path (a deleted file's
// without " (deleted)").
func takes(link string, mode uint32, nlink uint64, fstype int64) (string, bool) {
	if !strings.HasPrefix(link, "/") || notExternal(link) || mode&unix.S_IFMT != unix.S_IFREG ||
		fstype == migrate.ProcMagic || fstype == migrate.MQueueMagic {
		return "", false
	}
	path := link
	if nlink == 0 {
		path = strings.TrimSuffix(link, " (deleted)")
	}
	// The job's own directory and its own /tmp and /var/tmp: CRIU carries
	// them, and opens their files in the mounts it rebuilds.
	return path, !migrate.Under(path, JobDir) && !migrate.InJobTmp(path, fstype)
}

// viewExternals is externals of a tree readView has read: the same files
// and keys, a descriptor's mount from the fdinfo the view holds, without
// reading its descriptors again. (The dump reads them itself, externals:
// it needs each deleted file's /proc link, and none of the rest.)
func viewExternals(v migrate.View, still bool) ([]migrate.External, error) {
	var out []migrate.External
	seen := map[string]bool{}
	add := func(e migrate.External) {
		if !seen[e.Key] {
			seen[e.Key] = true
			out = append(out, e)
		}
	}
	skip := func(err error) bool {
		return !still || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
	}
	for _, t := range v.Tasks {
		proc := "/proc/" + strconv.Itoa(t.PID)
		for _, f := range t.FDs {
			path, ok := takes(f.Link, f.Mode, f.Nlink, f.FSType)
			if !ok {
				continue
			}
			mnt, err := infoMount(f.Info)
			if err != nil {
				if still {
					return nil, examine(f.Link, err)
				}
				continue
			}
			add(migrate.External{Key: migrate.ExtKey(mnt, f.Ino), Path: path, Deleted: f.Nlink == 0, FSID: f.FSID, Ino: f.Ino, Mode: f.Mode, Size: f.Size})
		}
		mapped := map[string]bool{} // as externals
		for _, m := range t.Maps {
			path, ok := takes(m.Path, m.Mode, m.Nlink, m.FSType)
			if !ok || mapped[m.Path] {
				continue
			}
			if !strings.HasSuffix(m.Path, " (deleted)") {
				mapped[m.Path] = true
			}
			mnt, err := openedMount(proc + "/map_files/" + m.Range)
			if err != nil {
				if skip(err) {
					continue
				}
				return nil, examine(m.Path, err)
			}
			add(migrate.External{Key: migrate.ExtKey(mnt, m.Ino), Path: path, Deleted: m.Nlink == 0, FSID: m.FSID, Ino: m.Ino, Mode: m.Mode, Size: m.Size})
		}
		f, ok, err := external(proc+"/exe", "")
		if err != nil && !skip(err) {
			return nil, err
		}
		if ok {
			add(f.External)
		}
	}
	return out, nil
}

// openedMount is the id of the mount the file src names is on, as an
// O_PATH descriptor of this process (which opens nothing) holds it.
func openedMount(src string) (int, error) {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return fdinfoMount("/proc/self/fdinfo/" + strconv.Itoa(fd))
}

// fdinfoMount is the mount id an fdinfo file names.
func fdinfoMount(info string) (int, error) {
	b, err := os.ReadFile(info)
	if err != nil {
		return 0, err
	}
	return infoMount(string(b))
}

// infoMount is the mount id fdinfo's text names.
func infoMount(info string) (int, error) {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(l, "mnt_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no mnt_id in its fdinfo")
}

// declare lists the keys of the frozen tree under pid for CRIU's dump into
// dir, and writes the content of each deleted file into dir
// (migrate.GhostImage), all of them together at most limit bytes.
func declare(pid int, dir string, limit int64) ([]string, error) {
	files, err := externals(pid, true)
	if err != nil {
		return nil, fmt.Errorf("the job's files: %w", err)
	}
	keys := make([]string, len(files))
	var total int64
	for i, f := range files {
		keys[i] = f.Key
		if !f.Deleted {
			continue
		}
		if total += f.Size; total > limit {
			return nil, fmt.Errorf("the job holds deleted files of more than %d bytes in all (%s among them)", limit, f.Path)
		}
		if err := saveGhost(f, filepath.Join(dir, migrate.GhostImage(f.Key))); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// saveGhost copies the deleted file f, read through its /proc link, into
// a new file at dst.
func saveGhost(f extFile, dst string) error {
	in, err := os.Open(f.src)
	if err != nil {
		return fmt.Errorf("read the deleted file %s: %w", f.Path, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("save the deleted file %s: %w", f.Path, err)
	}
	_, err = io.CopyN(out, in, f.Size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save the deleted file %s: %w", f.Path, err)
	}
	return nil
}
