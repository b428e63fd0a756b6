package migrate

import "testing"

// TestJobSeq: a job id's home and sequence number, over the whole range
// of the home's uint64 sequence, and no id that is not HOME.SEQ.
func TestJobSeq(t *testing.T) {
	if h, seq, ok := JobSeq("n2.18446744073709551615"); !ok || h != "n2" || seq != 1<<64-1 {
		t.Fatalf("JobSeq = %q %d %v", h, seq, ok)
	}
	for _, bad := range []string{"n2", "n2.", ".3", "n2.x", "n2.18446744073709551616"} {
		if _, _, ok := JobSeq(bad); ok {
			t.Fatalf("JobSeq(%q) ok", bad)
		}
	}
}
