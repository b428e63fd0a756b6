package httpx

import (
	"io"
	"net/http"
	"os"
	"time"

	"roam/internal/agent/stall"
)

// ServeFile answers with a file's bytes; a reader that stops reading
// for stall is cut off. The answer is chunked, without a length: it ends
// only when the handler returns, so the caller can finish its work first
// (a checkpoint's run notes the home after its delivery, and `roam
// checkpoint` returns once the job's record has it); a cut is still told
// from the end, by the missing last chunk.
func ServeFile(w http.ResponseWriter, path string, size int64, stall time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	// A reader that stops reading for stallTimeout is cut off: the file
	// (and, with --stop, the frozen job) is not held for it.
	rc := http.NewResponseController(w)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		_ = rc.SetWriteDeadline(time.Now().Add(stall))
		n, err := f.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			left -= int64(n)
		}
		if err != nil && left > 0 {
			return err
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.Flush() // a writer that cannot flush has it all already
	return nil
}

// WatchedBody is r's body, cut off when a read makes no progress for
// limit (the sender's link went down, or it died); stop ends the watch.
// It lifts the read deadline the server set (server.body_timeout): the
// watch bounds the body instead.
func WatchedBody(w http.ResponseWriter, r *http.Request, limit time.Duration) (body io.Reader, stop func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	wd := stall.Watch(limit, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
	return stall.NewReader(r.Body, wd), wd.Stop
}
