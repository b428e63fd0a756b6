package news

// The files a home's jobs' output goes to (roam run --output, --error).
// The home writes them, beside its spool, from what each push brings:
// at the output's offsets, so a piece sent twice writes the same bytes
// again and a restart from a checkpoint writes its output over what
// came after the checkpoint; once the job ended, each file is cut to
// its output's size. Each is opened as the job's user (package asuser:
// on a thread with the user's credentials, no symlink followed, a
// regular file only), never by root following a user's path. A file
// that cannot be written is given up for that job (its record says why,
// roam ps shows it); its output is in the spool still, for roam logs.

import (
	"fmt"

	"roam/internal/agent/relay"
	"roam/internal/asuser"
)

// fileOp is one write to a job's file: data at off, or, with cut, the
// file cut to off.
type fileOp struct {
	id   string
	path string
	off  int64
	data []byte
	cut  bool
}

// writeFiles writes into their files the output of ups that takeOutput
// took (got), and, for those whose end was taken (ended), cuts each
// file to its output's final size.
func (r *Relay) writeFiles(ups []relay.Update, got [][2]int64, ended map[string]bool) {
	ids := make([]string, 0, len(ups))
	for _, u := range ups {
		ids = append(ids, u.ID)
	}
	files := r.c.Jobs.FilesOf(ids)
	if len(files) == 0 {
		return
	}
	// One thread a user, whose every file of this push it opens.
	byUser := map[string][]fileOp{}
	creds := map[string]asuser.Cred{}
	for i, u := range ups {
		f, ok := files[u.ID]
		if !ok || f.Failed || got[i] == [2]int64{} && !ended[u.ID] {
			continue
		}
		key := fmt.Sprint(f.UID, f.GID, f.Groups)
		creds[key] = asuser.Cred{UID: f.UID, GID: f.GID, Groups: f.Groups}
		for _, s := range []struct {
			path     string
			off, end int64
			data     []byte
		}{{f.Out, u.OutOff, u.FinalOut, u.Out}, {f.Err, u.ErrOff, u.FinalErr, u.Err}} {
			if s.path != "" && len(s.data) > 0 && s.off >= 0 {
				byUser[key] = append(byUser[key], fileOp{id: u.ID, path: s.path, off: s.off, data: s.data})
			}
			if s.path != "" && ended[u.ID] {
				byUser[key] = append(byUser[key], fileOp{id: u.ID, path: s.path, off: s.end, cut: true})
			}
		}
	}
	for key, ops := range byUser {
		r.applyFileOps(creds[key], ops)
	}
}

// applyFileOps carries out one user's writes, as that user.
func (r *Relay) applyFileOps(cred asuser.Cred, ops []fileOp) {
	wants := make([]asuser.Want, len(ops))
	for i, op := range ops {
		wants[i] = asuser.Want{Path: op.path, Create: true}
	}
	got, err := asuser.Open(cred, wants)
	if err != nil {
		for _, op := range ops {
			r.fileFailed(op.id, err)
		}
		return
	}
	for i, g := range got {
		op := ops[i]
		if g.Err != nil {
			r.fileFailed(op.id, g.Err)
			continue
		}
		if op.cut {
			err = g.File.Truncate(op.off)
		} else {
			_, err = g.File.WriteAt(op.data, op.off)
		}
		g.File.Close()
		if err != nil {
			r.fileFailed(op.id, err)
		}
	}
}

// fileFailed keeps why job id's output did not go to its file.
func (r *Relay) fileFailed(id string, err error) {
	r.c.Log.Warn("job output: its file is not written (its output is in roam logs)", "job", id, "err", err)
	if err := r.c.Jobs.SetFileError(id, relay.LimitText(err.Error())); err != nil {
		r.c.Log.Error("job table", "err", err)
	}
}
