package ckpt

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A job's own /tmp and /var/tmp, the tmpfs mounts roam-init names
// JobTmpSource, are left to CRIU to dump and restore; every other mount
// but / and /proc is external, a tmpfs of another name at /tmp (the
// node's) and a mount of another kind named like the job's too.
func TestExternalMountsLeaveOutTheJobsTmp(t *testing.T) {
	mi := `490 489 254:0 / / rw,relatime - ext4 /dev/vda rw
498 490 254:0 /spool/1.1 /run/roam/job rw,relatime - ext4 /dev/vda rw
502 490 0:75 / /var/tmp rw,nosuid,nodev,relatime - tmpfs roam-job-tmp rw,size=1048576k
504 490 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334492k,mode=755
508 490 0:77 / /tmp rw,nosuid,nodev,relatime - tmpfs roam-job-tmp rw,size=1048576k
509 490 0:78 / /scratch rw,nosuid,nodev,relatime - tmpfs tmpfs rw
510 490 0:79 / /scratch/x rw,relatime - ext4 roam-job-tmp rw
511 490 0:80 / /my\040tmp rw,relatime - tmpfs roam\040job rw
512 490 0:20 / /proc rw - proc proc rw`
	got := externalMounts(mi)
	if want := []string{"/run/roam/job", "/dev", "/scratch", "/scratch/x", "/my tmp"}; !slices.Equal(got, want) {
		t.Fatalf("externalMounts = %v, want %v", got, want)
	}
	if m := parseMountinfo(mi); m[7].source != "roam job" {
		t.Fatalf("source %q, want it unescaped", m[7].source)
	}
}

// roam's gzip, as tar runs it: what it writes, the system's gzip reads
// (so images it made restore without it), and it reads back what it wrote
// and what the system's gzip wrote; an argument tar does not give is
// refused.
func TestGzipForCRIU(t *testing.T) {
	data := make([]byte, 3<<20)
	rand.Read(data[:1<<20]) // and zeros after
	var packed, errOut bytes.Buffer
	if code := gzipMain(nil, bytes.NewReader(data), &packed, &errOut); code != 0 {
		t.Fatalf("compress: %d %s", code, errOut.String())
	}
	if packed.Len() >= len(data)/2 {
		t.Fatalf("compressed %d bytes to %d", len(data), packed.Len())
	}
	sys := exec.Command("gzip", "-d")
	sys.Stdin = bytes.NewReader(packed.Bytes())
	if out, err := sys.Output(); err != nil || !bytes.Equal(out, data) {
		t.Fatalf("the system's gzip -d: %v, %d bytes back", err, len(out))
	}
	sys = exec.Command("gzip")
	sys.Stdin = bytes.NewReader(data)
	theirs, err := sys.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{packed.Bytes(), theirs} {
		var out bytes.Buffer
		if code := gzipMain([]string{"-d"}, bytes.NewReader(in), &out, &errOut); code != 0 || !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("decompress: %d %s, %d bytes back", code, errOut.String(), out.Len())
		}
	}
	if code := gzipMain([]string{"-9"}, bytes.NewReader(data), &packed, &errOut); code != 2 || !strings.Contains(errOut.String(), `not ["-9"]`) {
		t.Fatalf("gzip -9: %d %s", code, errOut.String())
	}
}

// FastGzip puts a gzip that is this program first on PATH, for the
// programs started from then on: tar --gzip, as CRIU runs it, makes with
// it an archive the system's tar reads back.
func TestFastGzip(t *testing.T) {
	t.Setenv("PATH", os.Getenv("PATH"))
	dir := t.TempDir()
	if err := FastGzip(filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	if p, err := exec.LookPath("gzip"); err != nil || p != filepath.Join(dir, "bin", "gzip") {
		t.Fatalf("gzip on PATH: %s %v", p, err)
	}
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	want := bytes.Repeat([]byte("roam "), 1<<16)
	os.WriteFile(filepath.Join(src, "f"), want, 0o644)
	tgz := filepath.Join(dir, "t.tar.gz")
	if out, err := exec.Command("sh", "-c", "tar --create --gzip --directory "+src+" . > "+tgz).CombinedOutput(); err != nil {
		t.Fatalf("tar --create --gzip: %v: %s", err, out)
	}
	fi, _ := os.Stat(tgz)
	if fi.Size() > int64(len(want))/10 {
		t.Fatalf("the archive is %d bytes", fi.Size())
	}
	dst := filepath.Join(dir, "dst")
	os.Mkdir(dst, 0o755)
	if out, err := exec.Command("/usr/bin/env", "PATH=/usr/bin:/bin", "tar", "--extract", "--gzip", "--directory", dst, "--file", tgz).CombinedOutput(); err != nil {
		t.Fatalf("the system's tar --extract --gzip: %v: %s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "f")); !bytes.Equal(got, want) {
		t.Fatalf("extracted %d bytes, want %d", len(got), len(want))
	}
}
