package news

// The files a home's jobs' output goes to (roam run --output, --error):
// the home notes the output each push brought to the file writer
// (package outfiles), which copies it from the spool as the job's user,
// on a goroutine of its own: a hung filesystem never holds up a push.

import (
	"roam/internal/agent/outfiles"
	"roam/internal/agent/relay"
	"roam/internal/asuser"
)

// noteFiles tells the file writer of the output of ups that takeOutput
// took (got: each spool's sizes after it), the last for the jobs whose
// end was taken (ended).
func (r *Relay) noteFiles(ups []relay.Update, got [][2]int64, ended map[string]bool) {
	ids := make([]string, 0, len(ups))
	for i, u := range ups {
		if got[i] != [2]int64{} || ended[u.ID] {
			ids = append(ids, u.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	files := r.c.Jobs.FilesOf(ids)
	for i, u := range ups {
		f, ok := files[u.ID]
		if !ok || f.Failed || got[i] == [2]int64{} && !ended[u.ID] {
			continue
		}
		r.c.Files.Note(u.ID, outfiles.Files{Cred: asuser.Cred{UID: f.UID, GID: f.GID, Groups: f.Groups}, Out: f.Out, Err: f.Err},
			u.Inc, got[i][0], got[i][1], ended[u.ID])
	}
}
