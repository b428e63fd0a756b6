// Package decisions records the agent's scheduling rounds when the
// config's record_decisions_bytes asks (off by default): each round's
// inputs as the agent had them, raw, the snapshot it built from them and
// the moves its policy decided (sched.Recorded), one JSON line a round in
// state_dir/decisions.jsonl, up to the bound.
//
// internal/sim's TestReplayedDecisions rebuilds each round's snapshot
// from the raw inputs with the simulator's own builder and checks that
// the same moves come out: the simulator's decisions are the agent's.
// Recording changes how no decision is made: a round's draws come from
// a source seeded from the agent's own random source, and are kept
// (sched.Tap).
//
// It writes a file and takes a lock of its own, taken last: no other
// lock is taken under it.
package decisions

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"roam/internal/sched"
)

// File is the record's name in the state directory.
const File = "decisions.jsonl"

// MaxBytes bounds record_decisions_bytes: a long run's record is a
// debugging aid, not a log.
const MaxBytes = 1 << 30

// Recorder writes rounds to a file up to a bound. A nil Recorder
// records nothing.
type Recorder struct {
	log  *slog.Logger
	path string
	mu   sync.Mutex // guards below; taken last
	left int64
	f    *os.File
	full bool
}

// New is a recorder of up to maxBytes in dir's File; nil when maxBytes
// is 0 (off).
func New(dir string, maxBytes int64, log *slog.Logger) *Recorder {
	if maxBytes <= 0 {
		return nil
	}
	return &Recorder{log: log, path: filepath.Join(dir, File), left: min(maxBytes, MaxBytes)}
}

// Add writes one round as a line, unless the bound is reached: then it
// writes no more and says so once. A write error stops the record.
func (r *Recorder) Add(rd sched.Recorded) {
	if r == nil {
		return
	}
	b, err := json.Marshal(rd)
	if err != nil {
		r.log.Warn("decisions: a round does not encode", "err", err)
		return
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full {
		return
	}
	if int64(len(b)) > r.left {
		r.stop("the record reached record_decisions_bytes", nil)
		return
	}
	if r.f == nil {
		if r.f, err = os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			r.stop("cannot open the record", err)
			return
		}
	}
	if _, err := r.f.Write(b); err != nil {
		r.stop("cannot write the record", err)
		return
	}
	r.left -= int64(len(b))
}

func (r *Recorder) stop(why string, err error) {
	r.full = true
	r.log.Warn("decisions: "+why+"; no more rounds are recorded", "file", r.path, "err", err)
	if r.f != nil {
		_ = r.f.Close()
	}
}
