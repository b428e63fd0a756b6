// Package cpufeattest gives tests package cpufeat's recorded CPUs.
package cpufeattest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"roam/internal/cpufeat"
)

// TwoGenerations are the recorded CPUs of package cpufeat's tests: a
// Haswell (AVX2) and a Sapphire Rapids (AVX-512).
func TwoGenerations(t testing.TB) (older, newer cpufeat.Set) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	read := func(f string) cpufeat.Set {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		return cpufeat.FromFlags(cpufeat.X86, strings.Fields(string(b)))
	}
	return read("haswell-e5-2666v3-kvm.flags"), read("sapphirerapids-kvm.flags")
}
