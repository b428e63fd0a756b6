package relay

import (
	"slices"
	"time"

	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Note is what a job's current node tells its home: a migration, the
// new node, a pin reason, the manual flag.
type Note struct {
	ID        string         `json:"id"`
	Node      string         `json:"node,omitempty"`
	Migration *api.Migration `json:"migration,omitempty"`
	PinReason string         `json:"pin_reason,omitempty"`
	Manual    *bool          `json:"manual,omitempty"`
	// Inc is the incarnation of the copy the note is of: a note of an
	// older one than the record's is dropped. Nil: unknown (a migration
	// finished after an agent restart, or an older roam).
	Inc *int `json:"inc,omitempty"`
	// Checkpoint is a checkpoint tried.
	Checkpoint *api.Checkpoint `json:"checkpoint,omitempty"`
}

// Noted is rec with note n taken, and whether to keep it (false: the
// note changes nothing), the events it makes, and the checkpoint kept
// elsewhere that a newer one replaces.
func Noted(rec job.Record, n Note, now time.Time) (next job.Record, keep bool, back []api.Event, drop *api.Checkpoint) {
	if n.Inc != nil && *n.Inc < rec.Inc {
		return rec, false, nil, nil // of a copy an older incarnation: it is being ended
	}
	if c := n.Checkpoint; c != nil {
		next, drop = checkpointNoted(rec, *c)
		return next, true, nil, drop
	}
	if m := n.Migration; m != nil && m.MID != "" {
		for _, old := range rec.MigrationLog {
			if old.MID == m.MID {
				return rec, false, nil, nil
			}
		}
		if m.OK && m.Seq > rec.Migrations {
			// A migration newer than any the home knows committed while
			// the home thought the job lost (its source was declared dead
			// mid-move): it runs at m.To. An older note says nothing of
			// where it runs now.
			if e, ok := Revive(&rec, m.To, now); ok {
				back = append(back, e)
			}
		}
		node, seq := migrate.ApplyNote(rec.Node, rec.Migrations, m.OK, m.To, m.Seq)
		if !rec.Over() {
			rec.Node = node
		}
		rec.Migrations = seq
		if m.OK {
			rec.PinReason = ""
		}
	} else if n.Node != "" && !rec.Over() {
		rec.Node = n.Node
	}
	if n.Migration != nil {
		rec.MigrationLog = append(slices.Clip(rec.MigrationLog), *n.Migration)
		if len(rec.MigrationLog) > job.MaxMigrationLog {
			rec.MigrationLog = rec.MigrationLog[len(rec.MigrationLog)-job.MaxMigrationLog:]
		}
	}
	if n.PinReason != "" {
		rec.PinReason = n.PinReason
	}
	if n.Manual != nil {
		rec.Manual = *n.Manual
	}
	return rec, true, back, nil
}

// checkpointNoted is rec with checkpoint c tried: a periodic one kept on
// a node becomes the newest, and the one it replaces (drop) is to be
// dropped where it was kept.
func checkpointNoted(rec job.Record, c api.Checkpoint) (next job.Record, drop *api.Checkpoint) {
	if _, err := cpufeat.Parse(c.CPU); err != nil {
		c.CPU = "" // a peer's: kept only as a CPU's features, else unknown
	}
	next = rec
	next.Checkpoints = append(slices.Clone(rec.Checkpoints), c)
	if len(next.Checkpoints) > job.MaxMigrationLog {
		next.Checkpoints = next.Checkpoints[len(next.Checkpoints)-job.MaxMigrationLog:]
	}
	if c.OK && c.StoredOn != "" && (rec.Newest == nil || c.At.After(rec.Newest.At)) {
		if old := rec.Newest; old != nil && old.StoredOn != c.StoredOn {
			drop = old
		}
		next.Newest = &c
	}
	return next, drop
}
