package main

// roamd's log: lines of text (or JSON with --log-json) on standard error.
// Under systemd, whose journal reads standard error, each line starts
// with its syslog priority (sd-daemon(3)'s "<N>" prefix), so `journalctl
// -p warning -u roamd` shows warnings and errors only.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
)

// newLogger logs records of level and above to w; with journal, each line
// is prefixed with its priority.
func newLogger(w io.Writer, level slog.Level, asJSON, journal bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if !journal {
		if asJSON {
			return slog.New(slog.NewJSONHandler(w, opts))
		}
		return slog.New(slog.NewTextHandler(w, opts))
	}
	j := &journalHandler{mu: &sync.Mutex{}, buf: &bytes.Buffer{}, out: w}
	if asJSON {
		j.inner = slog.NewJSONHandler(j.buf, opts)
	} else {
		j.inner = slog.NewTextHandler(j.buf, opts)
	}
	return slog.New(j)
}

// journalHandler formats a record with inner into buf and writes it to
// out behind its priority; mu and buf are shared by its derived handlers.
type journalHandler struct {
	inner slog.Handler
	mu    *sync.Mutex
	buf   *bytes.Buffer
	out   io.Writer
}

func (j *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return j.inner.Enabled(ctx, l)
}

func (j *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf.Reset()
	if err := j.inner.Handle(ctx, r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(j.out, "<%d>%s", priority(r.Level), j.buf.Bytes())
	return err
}

func (j *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{inner: j.inner.WithAttrs(as), mu: j.mu, buf: j.buf, out: j.out}
}

func (j *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: j.inner.WithGroup(name), mu: j.mu, buf: j.buf, out: j.out}
}

// priority is a level's syslog priority: 3 error, 4 warning, 6 info,
// 7 debug.
func priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// toJournal says whether standard error is systemd's journal: the stream
// JOURNAL_STREAM names (device:inode) is the one fd 2 is.
func toJournal() bool {
	var dev, ino uint64
	if _, err := fmt.Sscanf(os.Getenv("JOURNAL_STREAM"), "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st syscall.Stat_t
	return syscall.Fstat(2, &st) == nil && uint64(st.Dev) == dev && st.Ino == ino
}
