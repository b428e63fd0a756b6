package outbound

import (
	"testing"
	"time"

	"roam/internal/job"
)

// fenceLeases is a node's fencing as a dump sees it: whether the fence
// killed the job.
type fenceLeases struct{ killed bool }

func (fenceLeases) LeaseAge(job.Local) time.Duration { return 0 }
func (fenceLeases) FenceHolds(string) bool           { return false }
func (fenceLeases) DumpBegins(string)                {}
func (fenceLeases) DumpEnds(string, error)           {}
func (f fenceLeases) FenceKilled(string) bool        { return f.killed }

// A dump that CRIU says went well, of a job its fence killed meanwhile,
// fails: its images did not restore on any node in the chaos run, where
// the fence killed the job in the middle of a slow periodic checkpoint
// and its home tried them again and again.
func TestNoDumpOfAJobItsFenceKilled(t *testing.T) {
	for _, killed := range []bool{false, true} {
		d := &Driver{leases: fenceLeases{killed: killed}}
		if err := d.watchedDump("1.1", func() error { return nil }); (err != nil) != killed {
			t.Errorf("fence killed %v: the dump's error %v", killed, err)
		}
	}
}
