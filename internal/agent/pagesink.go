package agent

// Streamed eager migration: the source's dump writes the memory pages
// straight to a page sink on the destination, while it dumps, so that the
// copy overlaps the dump and no page is written to the source's disk or
// read back. Only the small images (registers, files, mappings) and the
// spool files follow in the migration stream. The sinks are package
// moves' (moves.Sink); this file has the agent's ends of them.

import (
	"fmt"
	"path/filepath"
	"time"

	"roam/internal/agent/moves"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/stall"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// openSink starts a page server that writes into a new images directory
// for migration mid, and lists it (package moves has the sinks).
func (a *Agent) openSink(mid string) error {
	if !migrate.ValidMID(mid) {
		return errkind.New(peer.ErrBadRequest, "page sink: mid %q", mid)
	}
	if a.migr.Sink(mid) != nil {
		// Its directory is the one a new sink would make anew.
		return errkind.New(peer.ErrBadRequest, "page sink for migration %s exists", mid)
	}
	s, err := moves.NewSink(mid, filepath.Join(a.imageDir, "in-"+mid), a.ckpt.Sink)
	if err != nil {
		return err
	}
	if err := a.migr.OpenSink(s); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// sinkError is how migration mid's page server failed, waiting for it to
// end at most a second: "" when it did not fail or is unknown.
func (a *Agent) sinkError(mid string) string {
	if s := a.migr.Sink(mid); s != nil {
		return s.Failure(time.Second)
	}
	return ""
}

// streamedDump dumps the job with its pages going, as they are dumped,
// to the destination's page sink for migration mid; it returns the bytes
// carried (the destination opened the sink when the source checked). A
// stream that makes no progress for stallTimeout is cut, which fails the
// dump.
func (a *Agent) streamedDump(addr, mid string, pid int, dir string, mounts []string, ph *phases.Log) (int64, error) {
	t := time.Now()
	remote, err := a.dialPeerStream(addr, peer.Pages+"?mid="+mid)
	ph.Add("page stream", t)
	if err != nil {
		return 0, fmt.Errorf("page stream to the destination: %w", err)
	}
	g := stall.Guard(remote, stallTimeout)
	defer g.Watchdog().Stop()
	times, err := a.ckpt.Dump(pid, dir, mounts, g)
	ph.AddTimes(times, false)
	n := g.Written()
	switch {
	case err != nil && g.Watchdog().Stalled():
		return n, fmt.Errorf("page stream stalled after %d bytes (no progress for %s): %v", n, stallTimeout, err)
	case err != nil:
		// The destination's side of a failed stream says more (its
		// disk is full, say) than the dump's broken pipe.
		var st struct {
			Error string `json:"error"`
		}
		if a.peers.CallAddr(addr, "GET", peer.MigrateSink+"?mid="+mid, nil, &st) == nil && st.Error != "" {
			err = fmt.Errorf("destination: %s; %w", st.Error, err)
		}
	}
	return n, err
}
