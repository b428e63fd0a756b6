package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Go's fuzzing coordinator sends its workers' standard error nowhere: a
// worker that dies of a fatal error in a goroutine of the agent's (one an
// input started, still running when the next input came) leaves only
// "fuzzing process hung or terminated unexpectedly: exit status 2", and
// the input Go keeps then passes alone. With ROAM_FUZZ_STDERR naming a
// directory (scripts/fuzz.sh sets it, and prints these files when a
// target fails), each worker writes its standard error to a file of its
// own there, with the trace of what killed it.
func init() {
	dir := os.Getenv("ROAM_FUZZ_STDERR")
	if dir == "" || !slices.Contains(os.Args, "-test.fuzzworker") {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("worker-%d.log", os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	_ = syscall.Dup3(int(f.Fd()), 2, 0)
	f.Close()
}
