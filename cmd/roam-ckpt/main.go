// Command roam-ckpt is the migration benchmark's local dump-and-restore
// baseline (roam bench migrate): it dumps a running job with CRIU where it
// runs, restores a second copy from the images on the same node, as a node
// would without the network, then kills the copy and resumes the job. It
// runs as root on a node of an emulated cluster, inside that node's network
// namespace as the node's agent does (the bench starts it with
// nsenter --net=/run/netns/NETNS), and prints the dump and restore times as
// one JSON object on stdout:
//
//	{"dump_ms":12.3,"restore_ms":45.6,"dump":[...],"restore":[...]}
//
// On failure it prints one line on stderr and exits with status 1. It
// exists so that the roam CLI links no CRIU code of its own.
//
// Usage:
//
//	roam-ckpt [--criu PATH] [--keep] --node-dir DIR JOB-ID
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/ckpt"
	"roam/internal/procfs"
)

const usage = "usage: roam-ckpt [--criu PATH] [--keep] --node-dir DIR JOB-ID"

// Result is what roam-ckpt prints: the times of the dump and of the
// restore, in milliseconds.
type Result struct {
	DumpMS    float64 `json:"dump_ms"`
	RestoreMS float64 `json:"restore_ms"`
	// Where each went, as CRIU's statistics say.
	Dump    ckpt.Times `json:"dump"`
	Restore ckpt.Times `json:"restore"`
}

func main() {
	fs := flag.NewFlagSet("roam-ckpt", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	criuPath := fs.String("criu", "", "CRIU binary (default: roam's own CRIU, else criu on PATH)")
	nodeDir := fs.String("node-dir", "", "the node's state directory: the images go below it, the job's spool directory is DIR/spool/JOB-ID")
	keep := fs.Bool("keep", false, "keep the images directory, with CRIU's dump.log and restore.log, and print its path on stderr")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(usage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			os.Exit(0)
		}
		fail(fmt.Errorf("%v (%s)", err, usage))
	}
	if fs.NArg() != 1 || *nodeDir == "" {
		fail(errors.New(usage))
	}
	path := *criuPath
	if path == "" {
		path = ckpt.DefaultPath()
	}
	r, err := dumpRestore(path, *nodeDir, fs.Arg(0), *keep)
	if err != nil {
		fail(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s\n", b)
}

// fail prints err on one line and exits with status 1.
func fail(err error) {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	fmt.Fprintf(os.Stderr, "roam-ckpt: %s\n", msg)
	os.Exit(1)
}

// dumpRestore dumps job id where it runs to a directory below the node's
// state directory and restores a second copy from the images; the copy is
// then killed and the job resumed.
func dumpRestore(criuPath, nodeDir, id string, keep bool) (Result, error) {
	var r Result
	pids := ckpt.Copies(id)
	if len(pids) != 1 {
		return r, fmt.Errorf("job %s has %d copies on this host", id, len(pids))
	}
	pid := pids[0]
	dir, err := os.MkdirTemp(nodeDir, "bench-images-")
	if err != nil {
		return r, err
	}
	if keep {
		fmt.Fprintf(os.Stderr, "roam-ckpt: images and logs kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	mounts, err := ckpt.Mounts(pid)
	if err != nil {
		return r, err
	}
	c := &ckpt.CRIU{Path: criuPath, ExecMu: &sync.Mutex{}}
	if ckpt.UsableYard(ckpt.YardDir) {
		// The agent's, in whose mount namespace this runs: CRIU as the
		// agent runs it.
		c.Yard = ckpt.YardDir
	}
	// CRIU runs in this process's network namespace, the job's: from
	// another one it would try to dump and lock the network.
	t0 := time.Now()
	dt, err := c.Dump(ckpt.DumpOpts{PID: pid, Dir: dir, Mounts: mounts})
	if err != nil {
		ckpt.Thaw(procfs.Tree(pid), nil)
		return r, err
	}
	r.DumpMS = float64(time.Since(t0).Microseconds()) / 1000
	tree := procfs.Tree(pid)
	defer ckpt.Thaw(tree, nil)
	mm := map[string]string{}
	for _, m := range mounts {
		mm[m] = m
	}
	mm[ckpt.JobDir] = filepath.Join(nodeDir, "spool", id)
	t1 := time.Now()
	copyPID, rt, err := c.Restore(ckpt.RestoreOpts{Dir: dir, Mounts: mm})
	if err != nil {
		return r, err
	}
	r.RestoreMS = float64(time.Since(t1).Microseconds()) / 1000
	r.Dump, r.Restore = dt, rt
	killWait(copyPID, 30*time.Second)
	return r, nil
}

// killWait kills pid and waits, up to d, until it is gone (or its pid is
// another process's).
func killWait(pid int, d time.Duration) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		now, err := procfs.ReadStat(pid)
		if err != nil || now.StartTime != st.StartTime || now.State == 'Z' {
			return
		}
	}
}
