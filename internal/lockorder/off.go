//go:build !lockcheck

package lockorder

// Checking is off: these cost nothing.

func checkTake(*Mutex) {}
func taken(*Mutex)     {}
func released(*Mutex)  {}

// Collect does nothing without the lockcheck tag.
func Collect() {}

// Violations is always empty without the lockcheck tag.
func Violations() []string { return nil }

// On says whether locks are checked (the lockcheck tag).
const On = false

// HeldHere says whether the calling goroutine holds m: unknown without
// the lockcheck tag, false.
func HeldHere(*Mutex) bool { return false }
