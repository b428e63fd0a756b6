package ckpt

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CRIU keeps a tmpfs it dumps (a job's own /tmp, see jobtmp.go) in the
// images as the output of `tar --create --gzip`, and tar runs the gzip it
// finds on PATH, at gzip's default level: about 20 MB/s here on data that
// does not compress, while the job is frozen (100 MiB of random bytes in
// a job's /tmp froze its migration for 5.8 s, against 0.2 s with /tmp
// empty). So the agent puts a gzip of its own first on the PATH of the
// CRIU it runs (FastGzip): this program, started under the name gzip,
// which compresses at deflate's fastest level (400 MB/s here on random
// bytes, more on text or zeros; the same migration froze for 1.1 s) and
// reads a stream back (-d) as fast. Stored blocks (level 0) were faster
// on random bytes (0.8 s) and slower on zeros (0.9 s against 0.6 s),
// which they send whole. Its output is gzip's format, which any gzip and
// any CRIU read: an agent without it, or `criu restore` by hand, restores
// the same images.

// gzipName is the name tar runs.
const gzipName = "gzip"

// Every program that links this package is also that gzip when started
// under its name (through the link FastGzip makes); no program of roam's
// is otherwise called so.
func init() {
	if filepath.Base(os.Args[0]) == gzipName {
		os.Exit(gzipMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// FastGzip makes dir/gzip this program and puts dir first on this
// process's PATH, which the programs it starts inherit: CRIU, and the tar
// CRIU runs. The agent calls it once, at start.
func FastGzip(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("gzip for CRIU: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gzip for CRIU: %w", err)
	}
	link := filepath.Join(dir, gzipName)
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("gzip for CRIU: %w", err)
	}
	if err := os.Symlink(exe, link); err != nil {
		return fmt.Errorf("gzip for CRIU: %w", err)
	}
	return os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// gzipMain is gzip as tar runs it: no argument compresses standard input
// to standard output, -d decompresses.
func gzipMain(args []string, in io.Reader, out io.Writer, errOut io.Writer) int {
	var err error
	switch {
	case len(args) == 0:
		err = compress(in, out)
	case len(args) == 1 && (args[0] == "-d" || args[0] == "--decompress"):
		err = decompress(in, out)
	default:
		fmt.Fprintf(errOut, "gzip (roam's, for CRIU's tar): takes no argument but -d, not %q\n", args)
		return 2
	}
	if err != nil {
		fmt.Fprintf(errOut, "gzip (roam's, for CRIU's tar): %v\n", err)
		return 1
	}
	return 0
}

func compress(in io.Reader, out io.Writer) error {
	bw := bufio.NewWriterSize(out, 1<<20)
	w, err := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, bufio.NewReaderSize(in, 1<<20)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func decompress(in io.Reader, out io.Writer) error {
	r, err := gzip.NewReader(bufio.NewReaderSize(in, 1<<20))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	if _, err := io.Copy(bw, r); err != nil {
		return err
	}
	if err := r.Close(); err != nil {
		return err
	}
	return bw.Flush()
}
