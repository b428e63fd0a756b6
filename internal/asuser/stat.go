package asuser

import (
	"os"
	"runtime"
)

// Stat looks each path up as cred would, following symlinks as the
// user's own exec or chdir does, and says what it found: a path the user
// cannot reach fails with the user's error (EACCES), whether or not it
// exists, so that root's lookups tell a user nothing of a directory the
// user may not search. The error is for the thread itself; each path's
// own failure is in its error.
func Stat(cred Cred, paths []string) ([]os.FileInfo, []error, error) {
	type result struct {
		fis  []os.FileInfo
		errs []error
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// As in Open: the thread ends with this goroutine.
		runtime.LockOSThread()
		if err := become(cred); err != nil {
			ch <- result{err: err}
			return
		}
		r := result{fis: make([]os.FileInfo, len(paths)), errs: make([]error, len(paths))}
		for i, p := range paths {
			r.fis[i], r.errs[i] = os.Stat(p)
		}
		ch <- r
	}()
	r := <-ch
	return r.fis, r.errs, r.err
}
