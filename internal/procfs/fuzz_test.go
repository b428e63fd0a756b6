package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Fuzz target for /proc/PID/stat, whose command name (field 2) any
// process sets to what it likes (prctl PR_SET_NAME, or its file name).
// scripts/fuzz.sh runs it.

// fuzzStatLine is a /proc/PID/stat line as the kernel writes it (52
// fields), with st's values in their places.
func fuzzStatLine(pid int, comm string, st Stat) string {
	return fmt.Sprintf("%d (%s) %s 1 %d %d 0 -1 %d 100 0 0 0 %d %d %d %d 20 %d 1 0 %d 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		pid, comm, []byte{st.State}, pid, pid, st.Flags, st.UTime, st.STime, st.CUTime, st.CSTime, st.Nice, st.StartTime)
}

// FuzzParseStat: a stat line the kernel writes reads back as its values,
// whatever the command name (spaces, parentheses, newlines); and a line
// parseStat accepts gives a state that is one non-blank byte and values
// that read back the same when written as the kernel would.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 12345 1000 50\n"), "a (b) c", byte('S'), uint64(4194560), uint64(7), uint64(3), uint64(2), uint64(1), uint64(12345))
	f.Add([]byte("1 (systemd) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 1 1"), ") R 1 2 3", byte('R'), uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add([]byte("7 (x) Z"), "\n\n", byte('Z'), uint64(18446744073709551615), uint64(1), uint64(18446744073709551615), uint64(1), uint64(1), uint64(18446744073709551615))
	f.Add([]byte("7 (x)  T 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"), "", byte('T'), uint64(1), uint64(1), uint64(1), uint64(1), uint64(1), uint64(1))
	f.Add([]byte(""), "comm)", byte('D'), uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6))
	f.Fuzz(func(t *testing.T, raw []byte, comm string, state byte, flags, utime, stime, cutime, cstime, start uint64) {
		if st, err := parseStat(raw); err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error of another kind: %v", err)
			}
		} else {
			if len(bytes.TrimSpace([]byte{st.State})) == 0 {
				t.Fatalf("state %q from %q", st.State, raw)
			}
			if again, err := parseStat([]byte(fuzzStatLine(1, "x", st))); err != nil || again != st {
				t.Fatalf("%+v written and read back: %+v, %v", st, again, err)
			}
		}
		if !('A' <= state && state <= 'Z' || 'a' <= state && state <= 'z') {
			return
		}
		want := Stat{State: state, Flags: flags, UTime: utime, STime: stime, CUTime: cutime, CSTime: cstime, StartTime: start}
		line := fuzzStatLine(4242, comm, want)
		if got, err := parseStat([]byte(line)); err != nil || got != want {
			t.Fatalf("%q read as %+v, %v; want %+v", line, got, err, want)
		}
	})
}
