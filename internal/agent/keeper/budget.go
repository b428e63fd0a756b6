package keeper

// Each user's budgets of checkpoint files on this node: the files in
// flight (a checkpoint written here until it is delivered, a file taken
// until it is kept or its restart ended) by count and bytes, and the
// bytes of the kept ones (limits.checkpoints_in_flight,
// checkpoint_bytes_in_flight, checkpoint_bytes_kept). Root's files are
// counted, never refused at a budget: root may fill the disk anyway. The
// disk's reserve (limits.disk_reserve_bytes) holds for everyone's: a
// file that would eat into it is not worth the job table's next write.

import (
	"os"
	"path/filepath"
	"sort"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// use is a user's files in flight.
type use struct {
	n     int
	bytes int64
}

// Kept is a kept file as the budgets and the sweep see it.
type Kept struct {
	ID      string
	UID     uint32
	Bytes   int64
	Expires time.Time
}

// Hold holds bytes of a checkpoint file of uid's in flight, or refuses
// it past the user's budgets, or when writing it would leave the state
// disk less than its reserve (limits.disk_reserve_bytes: anyone's file,
// root's too); release ends the hold (once).
func (k *Keeper) Hold(uid uint32, bytes int64) (release func(), err error) {
	if err := k.lim.DiskShort(spool.Free(filepath.Dir(k.dir)), bytes); err != nil {
		return nil, errkind.New(peer.ErrLimit, "checkpoint of %s: %v", api.Bytes(bytes), err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.flight[uid]
	if uid != 0 {
		switch {
		case u.n+1 > k.lim.CheckpointsInFlight:
			return nil, errkind.New(peer.ErrLimit, "uid %d has %d checkpoint files in flight on node here, the most a user may (limits.checkpoints_in_flight)", uid, u.n)
		case u.bytes+bytes > k.lim.CheckpointBytesInFlight:
			return nil, errkind.New(peer.ErrLimit, "uid %d has %s of checkpoint files in flight here; %s more would pass %s (limits.checkpoint_bytes_in_flight)",
				uid, api.Bytes(u.bytes), api.Bytes(bytes), api.Bytes(k.lim.CheckpointBytesInFlight))
		}
	}
	k.flight[uid] = use{u.n + 1, u.bytes + bytes}
	done := false
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if done {
			return
		}
		done = true
		u := k.flight[uid]
		if u.n--; u.n <= 0 {
			delete(k.flight, uid)
			return
		}
		u.bytes -= bytes
		k.flight[uid] = u
	}, nil
}

// InFlight is uid's files in flight here: how many, how many bytes.
func (k *Keeper) InFlight(uid uint32) (int, int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.flight[uid]
	return u.n, u.bytes
}

// keptFits refuses a kept file of uid's of bytes that would pass the
// user's budget, the file it replaces (job id's) given back. Under mu.
func (k *Keeper) keptFits(id string, uid uint32, bytes int64) error {
	if uid == 0 {
		return nil
	}
	var sum int64
	for kid, f := range k.held {
		if f.UID == uid && kid != id {
			sum += f.Bytes
		}
	}
	if sum+bytes > k.lim.CheckpointBytesKept {
		return errkind.New(peer.ErrLimit, "uid %d has %s of checkpoints kept here; %s more would pass %s (limits.checkpoint_bytes_kept)",
			uid, api.Bytes(sum), api.Bytes(bytes), api.Bytes(k.lim.CheckpointBytesKept))
	}
	return nil
}

// FitsKept refuses, before it is taken, a file to keep that would pass
// its owner's budget of kept files.
func (k *Keeper) FitsKept(b migrate.Binding, bytes int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keptFits(b.Job, b.UID, bytes)
}

// KeptFiles lists the kept files, by job id.
func (k *Keeper) KeptFiles() []Kept {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Kept, 0, len(k.held))
	for _, f := range k.held {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// KeptBytes is what uid's kept files here add up to.
func (k *Keeper) KeptBytes(uid uint32) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var sum int64
	for _, f := range k.held {
		if f.UID == uid {
			sum += f.Bytes
		}
	}
	return sum
}

// scanKept finds the kept files at a start, for the budgets and the
// sweep: one whose head cannot be read (of an older format, another
// cluster's secret, cut short) is removed, as no restart would take it.
func (k *Keeper) scanKept() {
	ents, _ := os.ReadDir(k.dir)
	kept := map[string]Kept{}
	for _, e := range ents {
		id, ok := keptID(e)
		if !ok {
			continue
		}
		f, err := k.Read(k.kept(id))
		if err != nil || f.Bind.Job != id {
			os.Remove(k.kept(id))
			continue
		}
		kept[id] = keptOf(f)
	}
	k.mu.Lock()
	k.held = kept
	k.mu.Unlock()
}

func keptOf(f File) Kept {
	return Kept{ID: f.Bind.Job, UID: f.Bind.UID, Bytes: f.Size, Expires: f.Bind.Expires}
}

// keptID is the job id of a kept file's directory entry.
func keptID(e os.DirEntry) (string, bool) {
	name := e.Name()
	if !e.Type().IsRegular() || len(name) <= len(Ext) || name[len(name)-len(Ext):] != Ext {
		return "", false
	}
	id := name[:len(name)-len(Ext)]
	_, ok := migrate.JobHome(id)
	return id, ok
}
