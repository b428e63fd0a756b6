package asuser

import (
	"os"
)

// Stat looks each path up as cred would, following symlinks as the
// user's own exec or chdir does, and says what it found: a path the user
// cannot reach fails with the user's error (EACCES), whether or not it
// exists, so that root's lookups tell a user nothing of a directory the
// user may not search. The error is for the thread itself; each path's
// own failure is in its error.
func Stat(cred Cred, paths []string) ([]os.FileInfo, []error, error) {
	fis, errs := make([]os.FileInfo, len(paths)), make([]error, len(paths))
	err := as(cred, func() {
		for i, p := range paths {
			fis[i], errs[i] = os.Stat(p)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return fis, errs, nil
}
