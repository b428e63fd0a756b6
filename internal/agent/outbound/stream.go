package outbound

// A migration's stream of header and archive (format in package migrate):
// the files it carries, and the post that carries them to the
// destination.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"roam/internal/agent/peer"
	"roam/internal/agent/stall"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// streamFiles lists the regular files of the images and spool directories
// for the stream, and the FIFOs of the spool (a job's own FIFO). A spool
// file with a hole is refused (peer.ErrPinned): the archive carries every
// byte of a file, so a job's ftruncate of its stdout to 4 GiB would move,
// and land at the destination as, 4 GiB of zeros its disk never held.
func streamFiles(images, spool string) ([]migrate.File, error) {
	var out []migrate.File
	for _, part := range []struct{ prefix, dir string }{{migrate.DirImages + "/", images}, {migrate.DirSpool + "/", spool}} {
		ents, err := os.ReadDir(part.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.Type()&fs.ModeNamedPipe != 0 && part.dir == spool {
				out = append(out, migrate.File{Name: part.prefix + e.Name(), Path: filepath.Join(part.dir, e.Name()), FIFO: true})
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				return nil, err
			}
			path := filepath.Join(part.dir, e.Name())
			if part.dir == spool {
				if err := checkDense(path, fi.Size()); err != nil {
					return nil, err
				}
			}
			out = append(out, migrate.File{Name: part.prefix + e.Name(), Path: path, Size: fi.Size()})
		}
	}
	return out, nil
}

// checkDense refuses the file at path, of size bytes, if it has a hole
// before its end (SEEK_HOLE: a file system that does not know holes says
// none, and compressed data is not a hole, as its allocated blocks would
// wrongly say).
func checkDense(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	hole, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
	if err != nil && !errors.Is(err, unix.ENXIO) {
		return err
	}
	if err == nil && hole < size {
		return errkind.New(peer.ErrPinned, "sparse output: the job's %s has a hole at byte %d of its %d, and output moves as data, so a job with sparse output is neither checkpointed nor migrated",
			filepath.Base(path), hole, size)
	}
	return nil
}

func openFile(path string) (io.ReadCloser, error) { return os.Open(path) }

// sendImages streams the header, the images and the spool files to the
// destination, and waits for its "ready": a restored, stopped copy.
func (d *Driver) sendImages(addr string, hdr migrate.Header, images, spool string) (int64, peer.MigrateReady, error) {
	files, err := streamFiles(images, spool)
	if err != nil {
		return 0, peer.MigrateReady{}, err
	}
	plan, err := migrate.NewPlan(hdr, files)
	if err != nil {
		return 0, peer.MigrateReady{}, err
	}
	var ready peer.MigrateReady
	n, stalled, err := d.PostStream(addr, peer.MigrateStream, plan.Size(), func(w io.Writer) error { return plan.Write(w, openFile) }, &ready)
	if stalled && err != nil {
		return n, peer.MigrateReady{}, fmt.Errorf("transfer stalled after %d bytes (no progress for %s): %v", n, peer.StallTimeout, err)
	}
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return n, peer.MigrateReady{}, te.Err
	case errors.As(err, &re):
		return n, peer.MigrateReady{}, errors.New(re.Msg)
	}
	return n, ready, err
}

// PostStream posts the size bytes write makes to path on the peer at
// addr and decodes the answer into out: a migration's images, a
// checkpoint file. No progress for peer.StallTimeout while sending, or no
// answer within peer.RestoreTimeout after, ends it. It returns the bytes
// sent, whether the stall guard ended it, and api.Exchange's error.
func (d *Driver) PostStream(addr, path string, size int64, write func(io.Writer) error, out any) (int64, bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wd := stall.Watch(peer.StallTimeout, cancel)
	defer wd.Stop()
	pr, pw := io.Pipe()
	ww := stall.NewWriter(pw, wd)
	written := make(chan struct{})
	go func() {
		defer close(written)
		err := write(ww)
		pw.CloseWithError(err)
		if err != nil {
			cancel()
			return
		}
		wd.Expect(peer.RestoreTimeout)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, pr)
	if err == nil {
		req.ContentLength = size
		err = api.Exchange(d.peers.HTTP, req, out)
	}
	// The count is read once the writer returned: an answer before the
	// last byte went (an error) ends its writes.
	pr.Close()
	<-written
	return ww.Written(), wd.Stalled(), err
}
