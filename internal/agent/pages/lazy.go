package pages

// A lazy (post-copy) migration's pages: the source's dump keeps a page
// server, from which the destination's lazy-pages daemon fetches each
// page as the restored job touches it, then the rest in the background.

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/agent/stall"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/netx"
)

// LazyDump is a source's lazy dump serving pages, with the bytes served.
// A dump whose pages nobody fetches for lazyIdle (the destination died,
// or its daemon gave up) is ended, so that the source's CRIU does not
// serve, and hold the job's memory, forever.
type LazyDump struct {
	dump  ckpt.LazyDump
	bytes atomic.Int64
	moves Table // lists it while it serves
	mid   string
	idle  *stall.Watchdog
}

// lazyIdle is how long a lazy dump serves no page before it is ended: the
// destination's daemon fetches every page in the background, without
// long pauses, once the job runs there.
const lazyIdle = 2 * time.Minute

// StartLazyDump starts a lazy dump of migration mid and returns once the
// images (all but the pages) are written into dir.
func (s *Streams) StartLazyDump(mid string, pid int, dir string, mounts []string) (*LazyDump, ckpt.Times, error) {
	ld, times, err := s.ckpt.DumpLazy(pid, dir, mounts)
	if err != nil {
		return nil, times, err
	}
	d := &LazyDump{dump: ld, moves: s.moves, mid: mid}
	d.idle = stall.Watch(lazyIdle, func() {
		s.log.Error("lazy migration: no page fetched for a while; ending the page server", "mid", mid, "idle", lazyIdle)
		ld.End()
	})
	s.moves.ServeLazy(mid, d)
	return d, times, nil
}

// Wait returns once every page is served, or the dump failed.
func (d *LazyDump) Wait() error { return d.dump.Wait() }

// Bytes is how many bytes of pages the dump has served.
func (d *LazyDump) Bytes() int64 { return d.bytes.Load() }

// End forgets the dump and returns once it has ended (stopping its page
// server first when the migration failed). Safe to call twice.
func (d *LazyDump) End() {
	d.moves.EndLazy(d.mid)
	d.idle.Stop()
	d.dump.End()
}

// ServePages is peer.Pages: it turns the peer connection into a pipe to
// migration mid's page server on this node: the source's, serving a lazy
// migration's pages, or the destination's sink, taking an eager dump's.
func (s *Streams) ServePages(w http.ResponseWriter, r *http.Request) {
	mid := r.URL.Query().Get("mid")
	d, lazy := s.moves.Lazy(mid)
	var ps net.Conn
	var count *atomic.Int64
	sink := false
	if lazy {
		c, err := d.dump.Pages()
		if err != nil {
			httpx.WriteError(w, errkind.New(peer.ErrUnavailable, "page server: %v", err))
			return
		}
		ps, count = stall.Watched(c, d.idle), &d.bytes
	} else if ps = s.moves.TakeSinkConn(mid); ps != nil {
		sink = true
	} else {
		httpx.WriteError(w, errkind.New(peer.ErrNotFound, "no page server for migration %q here", mid))
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		ps.Close()
		return
	}
	_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if rw.Flush() != nil {
		ps.Close()
		conn.Close()
		return
	}
	// A dump streams without pause: a sink's connection that stalls is
	// dead (a lazy-pages daemon may pause, and ends on its own).
	if sink {
		conn = stall.Guard(conn, peer.StallTimeout)
	}
	// Bytes the client sent after its request are already buffered.
	var in io.Reader = conn
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		in = io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)
	}
	netx.Splice(conn, ps, in, count)
}

// StartLazyPages starts, on the destination, the lazy-pages daemon, whose
// connections go to the source's page server over the peer port. The
// returned channel is closed when the daemon ends; stop ends it.
func (s *Streams) StartLazyPages(from, mid, images string) (done <-chan struct{}, stop func(), err error) {
	addr, err := s.members.PeerAddr(from)
	if err != nil {
		return nil, nil, err
	}
	return s.ckpt.LazyPages(images, func() (net.Conn, error) {
		return s.dialStream(addr, peer.Pages+"?mid="+mid)
	})
}
