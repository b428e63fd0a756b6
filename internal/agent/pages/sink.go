package pages

// Streamed eager migration: the source's dump writes the memory pages
// straight to a page sink on the destination, while it dumps, so that the
// copy overlaps the dump and no page is written to the source's disk or
// read back. Only the small images (registers, files, mappings) and the
// spool files follow in the migration stream. The sinks are package
// moves' (moves.Sink); these are the agent's ends of them.

import (
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/moves"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/stall"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// OpenSink starts a page server that writes into a new images directory
// for migration mid, and lists it (package moves has the sinks).
func (s *Streams) OpenSink(mid string) error {
	if !migrate.ValidMID(mid) {
		return errkind.New(peer.ErrBadRequest, "page sink: mid %q", mid)
	}
	if s.moves.Sink(mid) != nil {
		// Its directory is the one a new sink would make anew.
		return errkind.New(peer.ErrBadRequest, "page sink for migration %s exists", mid)
	}
	sk, err := moves.NewSink(mid, filepath.Join(s.imageDir, "in-"+mid), s.ckpt.Sink)
	if err != nil {
		return err
	}
	if err := s.moves.OpenSink(sk); err != nil {
		sk.Stop()
		return err
	}
	return nil
}

// ServeSink is peer.MigrateSink: how migration ?mid='s page sink failed,
// for its source, whose dump broke off.
func (s *Streams) ServeSink(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"error": s.sinkError(r.URL.Query().Get("mid"))})
}

// sinkError is how migration mid's page server failed, waiting for it to
// end at most a second: "" when it did not fail or is unknown.
func (s *Streams) sinkError(mid string) string {
	if sk := s.moves.Sink(mid); sk != nil {
		return sk.Failure(time.Second)
	}
	return ""
}

// StreamedDump dumps the job with its pages going, as they are dumped,
// to the destination's page sink for migration mid; it returns the bytes
// carried (the destination opened the sink when the source checked). A
// stream that makes no progress for peer.StallTimeout is cut, which fails
// the dump.
func (s *Streams) StreamedDump(addr, mid string, pid int, dir string, mounts []string, ph *phases.Log) (int64, error) {
	t := time.Now()
	remote, err := s.dialStream(addr, peer.Pages+"?mid="+mid)
	ph.Add("page stream", t)
	if err != nil {
		return 0, fmt.Errorf("page stream to the destination: %w", err)
	}
	g := stall.Guard(remote, peer.StallTimeout)
	defer g.Watchdog().Stop()
	times, err := s.ckpt.Dump(pid, dir, mounts, g)
	ph.AddTimes(times, false)
	n := g.Written()
	switch {
	case err != nil && g.Watchdog().Stalled():
		return n, fmt.Errorf("page stream stalled after %d bytes (no progress for %s): %v", n, peer.StallTimeout, err)
	case err != nil:
		// The destination's side of a failed stream says more (its
		// disk is full, say) than the dump's broken pipe.
		var st struct {
			Error string `json:"error"`
		}
		if s.peers.CallAddr(addr, http.MethodGet, peer.MigrateSink+"?mid="+mid, nil, &st) == nil && st.Error != "" {
			err = fmt.Errorf("destination: %s; %w", st.Error, err)
		}
	}
	return n, err
}
