// Package outfiles is the owner of the files a home's jobs' output goes
// to (roam run --output, --error): what of each job's spool its files
// have, and one goroutine that copies the rest from the spool, as the
// job's user. The relay notes each job whose output came (Note) and goes
// on: a file on a slow or hung filesystem holds up this goroutine alone,
// never a node's push of news, whose acknowledgements rest on the spool.
//
// A file is written at the output's offsets, so a piece copied twice
// writes the same bytes again, and a restart from a checkpoint (a new
// incarnation, whose spool was cut back) writes its output over what
// came after the checkpoint; once the job ended, the file is cut to its
// output's size. Each file is opened as the job's owner (package asuser:
// a thread with the owner's credentials, no symlink followed, a regular
// file only, made 0600 when missing), never by root following a user's
// path. A file that cannot be written is given up for that job (Failed
// says why, once): its output is in the spool still, for roam logs.
//
// It reads the spools (package spool) and takes no lock of the agent's:
// its own is a leaf.
package outfiles

import (
	"fmt"
	"log/slog"
	"sync"

	"roam/internal/agent/spool"
	"roam/internal/asuser"
)

// chunk bounds what one round copies of one stream of one job: a job
// with more is copied on in the next round.
const chunk = 1 << 20

// Files are where a job's output goes, and whom to write them as.
type Files struct {
	Cred     asuser.Cred
	Out, Err string // "" for none
}

// Config is what a Writer is built from.
type Config struct {
	Spools *spool.Spools
	// Failed keeps why job id's output did not go to its file. It must
	// not block for long.
	Failed func(id, why string)
	Log    *slog.Logger
}

// Writer copies the home's jobs' output into their files. Safe for
// concurrent use.
type Writer struct {
	c    Config
	kick chan struct{}

	mu   sync.Mutex
	jobs map[string]*state
}

// state is what the writer knows of one job's files.
type state struct {
	files Files
	inc   int
	// have is what its files hold, by stream; size what its spool has.
	have, size [2]int64
	ended      bool
	dirty      bool
}

// New is a writer over c; Loop runs it.
func New(c Config) *Writer {
	return &Writer{c: c, kick: make(chan struct{}, 1), jobs: map[string]*state{}}
}

// Note says job id's spool, of incarnation inc, now holds out and errb
// bytes, its last when ended. It does not block.
func (w *Writer) Note(id string, f Files, inc int, out, errb int64, ended bool) {
	w.mu.Lock()
	s := w.jobs[id]
	if s == nil || inc > s.inc {
		// A new job here, or one restarted from a checkpoint: its files
		// are written again from the start of its spool.
		s = &state{inc: inc}
		w.jobs[id] = s
	}
	if inc == s.inc {
		s.files, s.size, s.dirty = f, [2]int64{out, errb}, true
		s.ended = s.ended || ended
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Loop copies what the notes asked for, until stop closes.
func (w *Writer) Loop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-w.kick:
		}
		for w.Round() {
		}
	}
}

// op is one write to a job's file: data at off, or, with cut, the file
// cut to off.
type op struct {
	id, path string
	stream   int
	off      int64
	data     []byte
	cut      bool
}

// Round copies what each noted job's files lack, up to chunk a stream,
// one thread a user; it says whether more is left.
func (w *Writer) Round() (more bool) {
	byUser := map[string][]op{}
	creds := map[string]asuser.Cred{}
	for id, s := range w.take() {
		key := fmt.Sprint(s.files.Cred.UID, s.files.Cred.GID, s.files.Cred.Groups)
		creds[key] = s.files.Cred
		for i, path := range [2]string{s.files.Out, s.files.Err} {
			if path == "" {
				continue
			}
			if s.have[i] < s.size[i] {
				data, err := w.c.Spools.Read(id, spool.Streams[i], s.have[i], chunk)
				if err == nil && len(data) == 0 {
					err = fmt.Errorf("its %s spool ends at %d bytes, short of %d", spool.Streams[i], s.have[i], s.size[i])
				}
				if err != nil {
					// Removed (roam purge) or broken: nothing more to copy.
					w.wrote(op{id: id}, err)
					break
				}
				byUser[key] = append(byUser[key], op{id: id, path: path, stream: i, off: s.have[i], data: data})
			}
			if s.ended {
				byUser[key] = append(byUser[key], op{id: id, path: path, stream: i, off: s.size[i], cut: true})
			}
		}
	}
	for key, ops := range byUser {
		w.apply(creds[key], ops)
	}
	return w.settle()
}

// take copies the noted jobs' states and clears their notes.
func (w *Writer) take() map[string]state {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]state{}
	for id, s := range w.jobs {
		if s.dirty {
			out[id] = *s
			s.dirty = false
		}
	}
	return out
}

// apply carries out one user's writes as that user, and notes what each
// file now has.
func (w *Writer) apply(cred asuser.Cred, ops []op) {
	wants := make([]asuser.Want, len(ops))
	for i, o := range ops {
		wants[i] = asuser.Want{Path: o.path, Create: true}
	}
	got, err := asuser.Open(cred, wants)
	for i, o := range ops {
		e := err
		if e == nil {
			if e = got[i].Err; e == nil {
				if o.cut {
					e = got[i].File.Truncate(o.off)
				} else {
					_, e = got[i].File.WriteAt(o.data, o.off)
				}
				got[i].File.Close()
			}
		}
		w.wrote(o, e)
	}
}

// wrote notes one write's outcome: a failed one gives the job's files up.
func (w *Writer) wrote(o op, err error) {
	w.mu.Lock()
	s := w.jobs[o.id]
	switch {
	case s == nil:
	case err != nil:
		delete(w.jobs, o.id)
	case !o.cut:
		s.have[o.stream] = max(s.have[o.stream], o.off+int64(len(o.data)))
	}
	w.mu.Unlock()
	if err != nil && s != nil {
		w.c.Log.Warn("job output: its file is not written (its output is in roam logs)", "job", o.id, "err", err)
		w.c.Failed(o.id, err.Error())
	}
}

// settle forgets the jobs that ended and whose files have all, and marks
// again those with more to copy; it says whether there are such.
func (w *Writer) settle() (more bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, s := range w.jobs {
		switch {
		case s.have[0] < s.size[0] && s.files.Out != "" || s.have[1] < s.size[1] && s.files.Err != "":
			s.dirty, more = true, true
		case s.ended && !s.dirty:
			delete(w.jobs, id)
		}
	}
	return more
}

// Pending counts the jobs the writer still has something of, for the
// tests.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}
