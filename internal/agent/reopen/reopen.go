// Package reopen is a restart's run as the node that restores sees it
// (the destination machine's run whose source is a checkpoint file:
// package migrate, dest_file.go): the file it runs from, and its calls to
// the job's home, which decides in place of a source (the consent, the
// commit, the news of a failure), with the messages of those calls, which
// the home's side (package checkpoints, consent.go) answers, and what that
// side keeps of the runs (Mark, Ended, Current). It must not touch
// the job table, CRIU, or any file but the checkpoint it reads; package
// agent's destination driver (package inbound) does the rest of the run.
package reopen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Request is /v1/peer/reopen: may run MID restart this job from
// this checkpoint on node On?
type Request struct {
	MID   string                 `json:"mid"`
	ID    string                 `json:"id"`
	Meta  migrate.CheckpointMeta `json:"meta"`
	Owner asuser.Cred            `json:"owner"`
	Every time.Duration          `json:"every,omitempty"`
	// On is the node the run restores on.
	On  string `json:"on,omitempty"`
	Why string `json:"why"`
	// Lost is the node membership declared dead that ran it (a home's own
	// restart): the record may still say it runs there.
	Lost string `json:"lost,omitempty"`
}

// Consent is the home's consent: the job, maybe under a new id, runs
// again as incarnation Inc on Node.
type Consent struct {
	ID       string `json:"id"`
	Node     string `json:"node"`
	Inc      int    `json:"inc"`
	Home     string `json:"home"`
	HomeAddr string `json:"home_addr"`
	Moves    int    `json:"moves"`
}

// Failed is /v1/peer/reopen/done: run MID failed, and nothing of it
// runs (the record goes back to what it was). The run tells only that:
// its commit is asked (Commit), and a run that may have restored a
// copy discards it before it tells.
type Failed struct {
	MID   string `json:"mid"`
	ID    string `json:"id"`
	Inc   int    `json:"inc"`
	Error string `json:"error,omitempty"`
}

// Commit is /v1/peer/reopen/commit: run MID of job ID holds its
// copy stopped; the home answers its decision (migrate.Outcome).
type Commit struct {
	MID string `json:"mid"`
	ID  string `json:"id"`
}

// Target is /v1/peer/ckpt/restore (the job's kept checkpoint,
// ID, to restart on On) and the query of /v1/peer/restore (the file sent,
// to restart here): the home to ask, and why.
type Target struct {
	ID   string `json:"id,omitempty"`
	Home string `json:"home"`
	On   string `json:"on,omitempty"`
	// Lost is the node declared dead that ran the job (a home's own
	// restart).
	Lost string `json:"lost,omitempty"`
	Why  string `json:"why"`
	// Rebind: the restored job serves Slurm job Slurm, on its nodes
	// Within ("" and none: no Slurm job), in place of the one its file
	// names: a user's restart runs in the Slurm job it is typed in, or
	// in none (a checkpoint carried to the next allocation). Without it
	// the file's binding holds (a home's own restart).
	Rebind bool     `json:"rebind,omitempty"`
	Slurm  string   `json:"slurm,omitempty"`
	Within []string `json:"within,omitempty"`
}

// Run is what a restart's run holds besides a migration's: its
// file, checked; what its home is told it is for; the home's consent,
// once given; and why it failed, to tell the home.
type Run struct {
	File  keeper.File
	Lost  string
	Why   string
	Grant Consent
	// Bind is Target's Rebind, Slurm and Within (its Home, ID, On,
	// Lost and Why unused): an agent that restarts in the middle of the
	// run forgets it, and the restore then meets the file's Slurm job.
	Bind Target
	// failed is why it failed, for the home.
	failed string
}

// Header is the header the run restores from: a file's, read whole
// (neither streamed nor lazy).
func (rr *Run) Header() migrate.Header {
	h := rr.File.Hdr
	h.Streamed, h.Lazy = false, false
	if rr.Bind.Rebind {
		h.Slurm, h.Within = rr.Bind.Slurm, rr.Bind.Within
	}
	return h
}

// NewRun is the run of a restart from file f for req.
func NewRun(f keeper.File, req Target) *Run {
	return &Run{File: f, Lost: req.Lost, Why: req.Why, Bind: Target{Rebind: req.Rebind, Slurm: req.Slurm, Within: req.Within}}
}

// Target is what the run was asked to do, for home.
func (rr *Run) Target(home string) Target {
	t := rr.Bind
	t.Home, t.Lost, t.Why = home, rr.Lost, rr.Why
	return t
}

// Verify is Verify. The keeper checked the file's head, META and header
// as it took it (Take, Open, Read), and the restore checks each chunk as
// it reads it (Open); what the run needs besides is a job it can name.
func (rr *Run) Verify() error {
	if _, ok := migrate.JobHome(rr.File.Hdr.ID); !ok || rr.File.Path == "" {
		return errkind.New(peer.ErrBadRequest, "checkpoint of job %q: not a job this node can restart", rr.File.Hdr.ID)
	}
	return rr.File.Meta.Validate()
}

// Open is the file's archive, past its head, META and header
// (Receive), read with key: each chunk is checked as it is read, so a
// file changed since it was taken fails its restore at that chunk.
func (rr *Run) Open(key []byte) (*os.File, *bufio.Reader, error) {
	f, err := os.Open(rr.File.Path)
	if err != nil {
		return nil, nil, err
	}
	_, _, _, br, err := migrate.ReadCheckpoint(f, key)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, br, nil
}

// NoteFailure keeps the first error an answer brings, for the home.
func (rr *Run) NoteFailure(ev migrate.DestEvent) {
	var err error
	switch e := ev.(type) {
	case migrate.Verified:
		err = e.Err
	case migrate.ConsentAnswer:
		err = e.Err
	case migrate.Received:
		err = e.Err
	case migrate.Restored:
		err = e.Err
	}
	if err != nil && rr.failed == "" {
		rr.failed = err.Error()
	}
}

// AskConsent is AskConsent: the home's consent to run r here, on self. A
// refusal is the home's answer; no answer, or one not for this run, may
// have been a consent (the home is told the run failed).
func (rr *Run) AskConsent(p *peer.Client, self string, r migrate.InRecord) migrate.ConsentAnswer {
	hdr := rr.File.Hdr
	req := Request{MID: r.MID, ID: hdr.ID, Meta: rr.File.Meta, Owner: asuser.Cred{UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups},
		Every: hdr.CheckpointEvery, On: self, Why: rr.Why, Lost: rr.Lost}
	var ans Consent
	if err := p.Call(r.Home, http.MethodPost, peer.Reopen, req, &ans); err != nil {
		return migrate.ConsentAnswer{Err: err, Refused: !errors.Is(err, peer.ErrUnavailable)}
	}
	_, err := netip.ParseAddrPort(ans.HomeAddr)
	if h, ok := migrate.JobHome(ans.ID); !ok || h != ans.Home || ans.Home != r.Home || ans.Node != self || ans.Inc < 1 || ans.Moves < 0 || err != nil {
		return migrate.ConsentAnswer{Err: fmt.Errorf("restart of job %s: home %s's consent is not for this run", hdr.ID, r.Home)}
	}
	grant, err := json.Marshal(ans)
	if err != nil {
		return migrate.ConsentAnswer{Err: err}
	}
	rr.Grant = ans
	return migrate.ConsentAnswer{Job: ans.ID, Inc: ans.Inc, Grant: grant}
}

// CommitAtHome is CommitAtHome: the home's decision on run r, whose copy
// waits stopped.
func CommitAtHome(p *peer.Client, r migrate.InRecord) migrate.HomeDecided {
	var o struct {
		Outcome migrate.Outcome `json:"outcome"`
	}
	if err := p.Call(r.Home, http.MethodPost, peer.ReopenCommit, Commit{MID: r.MID, ID: r.Job}, &o); err != nil {
		return migrate.HomeDecided{Err: err}
	}
	if o.Outcome != migrate.Committed && o.Outcome != migrate.Aborted {
		return migrate.HomeDecided{Err: fmt.Errorf("restart %s: home %s answered %q", r.MID, r.Home, o.Outcome)}
	}
	return migrate.HomeDecided{Outcome: o.Outcome}
}

// TellHome is TellHome: run r failed, and nothing of it runs here.
func (rr *Run) TellHome(p *peer.Client, r migrate.InRecord) migrate.HomeTold {
	why := rr.failed
	if why == "" {
		why = "the restart ended before its copy was restored"
	}
	return migrate.HomeTold{Err: p.Call(r.Home, http.MethodPost, peer.ReopenDone, Failed{MID: r.MID, ID: r.Job, Inc: r.Inc, Error: why}, nil)}
}

// Recovered is the run of a restart record an earlier start of this
// agent left: its file (the header its Adopt and Resume need) and the
// home's consent, as the record keeps them.
func Recovered(k *keeper.Keeper, r migrate.InRecord) (*Run, error) {
	rr := &Run{}
	if len(r.Grant) > 0 {
		if err := json.Unmarshal(r.Grant, &rr.Grant); err != nil {
			return rr, fmt.Errorf("restart %s: the home's consent: %w", r.MID, err)
		}
	}
	f, err := k.Read(r.File)
	if err != nil {
		return rr, fmt.Errorf("restart %s: its file: %w", r.MID, err)
	}
	rr.File = f
	return rr, nil
}

// Mark is a home's hold on a job being restarted: the run (MID) it
// consented to, the record from before and the consent it gave; or, with
// no MID yet, its own restart of a job of the dead node Lost, until its
// target asks.
type Mark struct {
	MID     string
	Lost    string
	Prev    *job.Record // ID "": no record was there
	Consent Consent
	At      time.Time // of the consent: a run not heard of by At+RunLimit is ended
}

// RunLimit bounds a restart's run from the home's consent to its commit:
// a mark older is ended by the home (a run that lost its node, or whose
// failure never came), and the run, if it is still going, hears
// "aborted" at its commit and discards its copy. It is far above what a
// checkpoint of limits.checkpoint_bytes takes to unpack and restore.
const RunLimit = 30 * time.Minute

// Holds says the mark keeps req from a consent: another run holds the
// job, or a home's own restart that req is not.
func (m *Mark) Holds(req Request) bool {
	return m != nil && (m.MID != "" || m.Lost != req.Lost)
}

// Current says rec's incarnation is run mid's.
func Current(rec *job.Record, mid string) bool {
	n := len(rec.Restarts)
	return n > 0 && rec.Restarts[n-1].MID == mid && rec.Restarts[n-1].Inc == rec.Inc
}

// Ended are the runs a home decided ended (told failed, or refused a
// commit): never consented again. Bounded, the newest MaxEnded: an older
// one is still refused by its entry in its job's Restarts.
type Ended struct {
	has   map[string]bool
	order []string
}

// MaxEnded bounds Ended.
const MaxEnded = 4096

// Has says run mid ended.
func (e *Ended) Has(mid string) bool { return e.has[mid] }

// Add records that run mid ended.
func (e *Ended) Add(mid string) {
	if e.has == nil {
		e.has = map[string]bool{}
	}
	if e.has[mid] {
		return
	}
	e.has[mid] = true
	if e.order = append(e.order, mid); len(e.order) > MaxEnded {
		delete(e.has, e.order[0])
		e.order = e.order[1:]
	}
}

// Restartable says whether a job on a node taken for dead (node) can be
// restarted from its newest checkpoint: there is one, kept on another
// node. That node may look dead too (a home cut off from both sees them
// so): the restart's tries wait for it (loss.RetryAfter), and the job is
// lost only once its checkpoint is gone.
func Restartable(newest *api.Checkpoint, node string) bool {
	return newest != nil && newest.OK && newest.StoredOn != "" && newest.StoredOn != node
}

// MayRestart says whether the caller uid (gid, groups) may restart a
// checkpoint bound as b: its owner or root, with the groups the caller
// has now, not those the job had when it was saved (a user removed from a
// group does not get it back). It is judged from the file's head, before
// its body is taken.
func MayRestart(uid, gid uint32, groups []uint32, b migrate.Binding) error {
	if uid != 0 && uid != b.UID {
		return errkind.New(peer.ErrPermission, "checkpoint of job %s (uid %d): permission denied", b.Job, b.UID)
	}
	if uid != 0 {
		for _, g := range append([]uint32{b.GID}, b.Groups...) {
			if g != gid && !slices.Contains(groups, g) {
				return errkind.New(peer.ErrPermission, "checkpoint of job %s runs with group %d, which uid %d is no longer in", b.Job, g, uid)
			}
		}
	}
	return nil
}
