// Package limits holds what one user's requests may cost the root agent
// (the config's limits: section) and what one connection may hold of its
// servers (the server: section): each bound, its default and its check.
// The agent enforces them; docs/security.md lists them. It does no I/O.
package limits

import (
	"cmp"
	"fmt"
	"roam/internal/api"
	"roam/internal/job"
	"slices"
	"sort"
	"time"
)

// Limits bound what a user's requests may cost this node. A request past
// one is refused with the limit's config key named; nothing changes.
type Limits struct {
	// ArgBytes bounds one process's arguments and environment together
	// (each string and its NUL, as the kernel counts them for exec): the
	// kernel's own bound is a quarter of the stack limit, 2 MiB with the
	// usual 8 MiB.
	ArgBytes int `yaml:"arg_bytes"`
	// RunCount bounds `roam run -n`.
	RunCount int `yaml:"run_count"`
	// RunBytes bounds -n times one job's arguments and environment: what
	// making a run's jobs may hold at once (each job's environment is a
	// slice of its own), whatever its records then keep of them (a
	// sweep's once: RecordsBytesPerUser).
	RunBytes int64 `yaml:"run_bytes"`
	// RecordsBytesPerUser bounds what one user's job records whose home
	// is this node cost, live and kept (ended) together: each record's
	// fixed part (job.RecordOverhead), its arguments and environment,
	// a sweep's shared arguments once (job.Charge). Every record is in
	// the home's memory and its bbolt, and in every `roam ps`: past it,
	// the user's new runs here are refused, until old jobs are purged
	// (roam purge) or expire (keep_finished); at the agent's start, the
	// records past it are removed (live ones kept first).
	RecordsBytesPerUser int64 `yaml:"records_bytes_per_user"`
	// LiveJobsPerUser bounds a user's jobs not yet ended whose home is
	// this node (Slurm's MaxSubmitJobs, HTCondor's MAX_JOBS_PER_OWNER).
	LiveJobsPerUser int `yaml:"live_jobs_per_user"`
	// OutputBytes bounds one job's output, stdout and stderr together:
	// past it the job is killed and `roam ps -l` says why. Checked at
	// every push (pushEvery), so a job writing very fast may overshoot by
	// what it writes in that time.
	OutputBytes int64 `yaml:"output_bytes"`
	// OutputBytesPerUser bounds the output one user's jobs running on a
	// node hold there together, in the blocks its disk allocated (a
	// sparse file costs what it holds, a hole nothing). Jobs write their
	// output to the node's state disk themselves, so this, not
	// output_bytes times live_jobs_per_user, is what one user may take
	// of it. Held at every push (pushEvery): past it, that user's jobs
	// here that wrote output are killed.
	OutputBytesPerUser int64 `yaml:"output_bytes_per_user"`
	// DiskReserveBytes is the free space of the node's state disk kept
	// for the agent's own writes: its job table, the home's copies of
	// every user's output, checkpoints. Below it, the node starts no job
	// and takes no checkpoint file, and at every push it kills the jobs
	// of the user whose output holds the most of its disk there, until
	// the space is back. It is what stops the jobs of many users, each
	// within output_bytes_per_user, filling a disk together, and a fast
	// writer between two pushes. 0: none kept.
	DiskReserveBytes int64 `yaml:"disk_reserve_bytes"`
	// SpoolBytesPerUser bounds the output this home keeps for one user's
	// jobs: past it, the user's new runs here are refused until old ones
	// are purged (roam purge) or expire (keep_finished).
	SpoolBytesPerUser int64 `yaml:"spool_bytes_per_user"`
	// RequestsPerSecond bounds each non-root user's requests on the API
	// socket, with bursts of up to four seconds' worth.
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	// KeepFinished is how long an ended job (finished or lost) and its
	// output stay at its home before they are removed.
	KeepFinished time.Duration `yaml:"keep_finished"`
	// KeepFinishedPerUser is how many of a user's ended jobs a home keeps
	// at most: the oldest go first.
	KeepFinishedPerUser int `yaml:"keep_finished_per_user"`
	// GhostBytes bounds the deleted files a job may hold open or mapped
	// and still move, all together (each the larger of its size and its
	// bytes on disk): the source copies them into the images. A job
	// holding more is pinned.
	GhostBytes int64 `yaml:"ghost_bytes"`
	// JobTmpBytes is the size of each of a job's own /tmp and /var/tmp:
	// tmpfs mounts that move with the job, their content in its images.
	// What a job keeps there counts against its memory, and a migration
	// freezes it for as long as the copy of that content takes.
	JobTmpBytes int64 `yaml:"job_tmp_bytes"`
	// CheckpointBytes bounds one checkpoint file a node takes: one sent
	// to it to keep (a job's periodic checkpoint), or to restart (roam
	// restart). A job's checkpoint is about its memory's size.
	CheckpointBytes int64 `yaml:"checkpoint_bytes"`
	// CheckpointsInFlight bounds how many checkpoint files of one user's
	// jobs a node holds in flight at once, CheckpointBytesInFlight their
	// bytes together: a checkpoint written until it is delivered (to its
	// user, or to the node that keeps it), a file taken until it is kept
	// or its restart ended (roam restart, a periodic checkpoint sent to
	// keep). Past either, the checkpoint or upload is refused.
	CheckpointsInFlight     int   `yaml:"checkpoints_in_flight"`
	CheckpointBytesInFlight int64 `yaml:"checkpoint_bytes_in_flight"`
	// CheckpointBytesKept bounds the periodic checkpoints a node keeps of
	// one user's jobs, all together: past it, a newer one is refused and
	// the job's older one (if any) stays.
	CheckpointBytesKept int64 `yaml:"checkpoint_bytes_kept"`
	// CheckpointExpiry is how long a checkpoint file may be restarted
	// after it was taken: every file carries its expiry, and a keeper
	// removes a kept one past it.
	CheckpointExpiry time.Duration `yaml:"checkpoint_expiry"`
	// CheckpointSweep is how often a node that keeps checkpoints asks
	// their jobs' homes whether they still need them: a job ended or
	// purged loses its kept checkpoint within one sweep.
	CheckpointSweep time.Duration `yaml:"checkpoint_sweep"`
	// ConnectionsPerUser bounds the connections one non-root user holds
	// open to the roam socket at once, Connections all non-root users'
	// together, RootConnections root's: past its cap, a new one is closed
	// as it comes, before anything is read of it (package connlimit).
	// One `roam` command is one connection (an attached run's for as long
	// as its job runs). Root's have a cap of their own, outside
	// Connections: the users together cannot lock root out of its own
	// node, and a runaway script of root's still cannot take every
	// descriptor of the agent.
	ConnectionsPerUser int `yaml:"connections_per_user"`
	Connections        int `yaml:"connections"`
	RootConnections    int `yaml:"root_connections"`
	// PeerConnections bounds the connections to the peer port held at
	// once, PeerConnectionsPerAddress those from one address, whoever
	// opened them: both are decided before the TLS handshake (which
	// needs no secret), so a job on any node, which shares its node's
	// network, is held to them like anyone.
	PeerConnections           int `yaml:"peer_connections"`
	PeerConnectionsPerAddress int `yaml:"peer_connections_per_address"`
}

// Default are the limits of a node whose config says nothing.
func Default() Limits {
	return Limits{
		ArgBytes:            2 << 20,
		RunCount:            10000,
		RunBytes:            256 << 20,
		RecordsBytesPerUser: DefaultRecordsBytes,
		LiveJobsPerUser:     10000,
		OutputBytes:         4 << 30,
		OutputBytesPerUser:  16 << 30,
		DiskReserveBytes:    1 << 30,
		SpoolBytesPerUser:   64 << 30,
		RequestsPerSecond:   200,
		KeepFinished:        7 * 24 * time.Hour,
		KeepFinishedPerUser: 10000,
		GhostBytes:          64 << 20,
		JobTmpBytes:         job.DefaultTmpBytes,
		CheckpointBytes:     64 << 30,
		CheckpointsInFlight: 4,
		// Two files of the largest size: a user's restart and a
		// checkpoint at once.
		CheckpointBytesInFlight: 128 << 30,
		CheckpointBytesKept:     256 << 30,
		CheckpointExpiry:        30 * 24 * time.Hour,
		CheckpointSweep:         5 * time.Minute,
		// What a busy node legitimately holds (docs/security.md): a
		// user's attached runs, one connection each; root's tools; a
		// peer's requests in flight, one connection each, and a few
		// kept alive (at most 3 from one peer, 6 in all, measured while
		// a burst of 12 jobs spread over 4 nodes and while 120 queued
		// jobs ran). A member's places come on top of the strangers'
		// total: 512 keeps the sum within LimitNOFILE up to about 80
		// nodes.
		ConnectionsPerUser:        256,
		Connections:               4096,
		RootConnections:           1024,
		PeerConnections:           8192,
		PeerConnectionsPerAddress: 512,
	}
}

// DefaultRecordsBytes is limits.records_bytes_per_user when the config
// sets none: 10,000 lone jobs with a 4 KiB environment each, or a
// sweep's 2 MiB of arguments thirty times over; a home holds at most
// this much for each user that has jobs there.
const DefaultRecordsBytes = 64 << 20

// Validate names the first limit out of range, by its config key.
func (l Limits) Validate() (string, error) {
	switch {
	case l.ArgBytes < 4096 || l.ArgBytes > 64<<20:
		return "limits.arg_bytes", fmt.Errorf("%d is out of range (4096 to 64 MiB)", l.ArgBytes)
	case l.RunCount < 1 || l.RunCount > 1000000:
		return "limits.run_count", fmt.Errorf("%d is out of range (1 to 1000000)", l.RunCount)
	case l.RunBytes < 1<<20:
		return "limits.run_bytes", fmt.Errorf("%d is below 1 MiB", l.RunBytes)
	case l.RecordsBytesPerUser < 1<<20 || l.RecordsBytesPerUser > 1<<40:
		return "limits.records_bytes_per_user", fmt.Errorf("%d is out of range (1 MiB to 1 TiB)", l.RecordsBytesPerUser)
	case l.LiveJobsPerUser < 1:
		return "limits.live_jobs_per_user", fmt.Errorf("%d is below 1", l.LiveJobsPerUser)
	case l.OutputBytes < 1<<20:
		return "limits.output_bytes", fmt.Errorf("%d is below 1 MiB", l.OutputBytes)
	case l.OutputBytesPerUser < 1<<20:
		return "limits.output_bytes_per_user", fmt.Errorf("%d is below 1 MiB", l.OutputBytesPerUser)
	case l.DiskReserveBytes < 0 || l.DiskReserveBytes > 1<<40:
		return "limits.disk_reserve_bytes", fmt.Errorf("%d is out of range (0 to 1 TiB)", l.DiskReserveBytes)
	case l.SpoolBytesPerUser < l.OutputBytes:
		return "limits.spool_bytes_per_user", fmt.Errorf("%d is below limits.output_bytes (%d)", l.SpoolBytesPerUser, l.OutputBytes)
	case !(l.RequestsPerSecond >= 1 && l.RequestsPerSecond <= 1e6): // NaN and Inf too
		return "limits.requests_per_second", fmt.Errorf("%v is out of range (1 to 1000000)", l.RequestsPerSecond)
	case l.KeepFinished < time.Minute:
		return "limits.keep_finished", fmt.Errorf("%v is below 1m", l.KeepFinished)
	case l.KeepFinishedPerUser < 1:
		return "limits.keep_finished_per_user", fmt.Errorf("%d is below 1", l.KeepFinishedPerUser)
	case l.GhostBytes < 0 || l.GhostBytes > 4<<30-1:
		return "limits.ghost_bytes", fmt.Errorf("%d is out of range (0 to 4 GiB - 1)", l.GhostBytes)
	case l.JobTmpBytes < 1<<20 || l.JobTmpBytes > 1<<40:
		return "limits.job_tmp_bytes", fmt.Errorf("%d is out of range (1 MiB to 1 TiB)", l.JobTmpBytes)
	case l.CheckpointBytes < 1<<20:
		return "limits.checkpoint_bytes", fmt.Errorf("%d is below 1 MiB", l.CheckpointBytes)
	case l.CheckpointsInFlight < 1 || l.CheckpointsInFlight > 1000:
		return "limits.checkpoints_in_flight", fmt.Errorf("%d is out of range (1 to 1000)", l.CheckpointsInFlight)
	case l.CheckpointBytesInFlight < l.CheckpointBytes:
		return "limits.checkpoint_bytes_in_flight", fmt.Errorf("%d is below limits.checkpoint_bytes (%d)", l.CheckpointBytesInFlight, l.CheckpointBytes)
	case l.CheckpointBytesKept < 0:
		return "limits.checkpoint_bytes_kept", fmt.Errorf("%d is below 0", l.CheckpointBytesKept)
	case l.CheckpointExpiry < time.Minute:
		return "limits.checkpoint_expiry", fmt.Errorf("%v is below 1m", l.CheckpointExpiry)
	case l.CheckpointSweep < time.Second || l.CheckpointSweep > 24*time.Hour:
		return "limits.checkpoint_sweep", fmt.Errorf("%v is out of range (1s to 24h)", l.CheckpointSweep)
	case l.Connections < 1 || l.Connections > 1<<20:
		return "limits.connections", fmt.Errorf("%d is out of range (1 to 1048576)", l.Connections)
	case l.ConnectionsPerUser < 1 || l.ConnectionsPerUser > l.Connections:
		return "limits.connections_per_user", fmt.Errorf("%d is out of range (1 to limits.connections, %d)", l.ConnectionsPerUser, l.Connections)
	case l.RootConnections < 1 || l.RootConnections > 1<<20:
		return "limits.root_connections", fmt.Errorf("%d is out of range (1 to 1048576)", l.RootConnections)
	case l.PeerConnections < 1 || l.PeerConnections > 1<<20:
		return "limits.peer_connections", fmt.Errorf("%d is out of range (1 to 1048576)", l.PeerConnections)
	case l.PeerConnectionsPerAddress < 1 || l.PeerConnectionsPerAddress > l.PeerConnections:
		return "limits.peer_connections_per_address", fmt.Errorf("%d is out of range (1 to limits.peer_connections, %d)", l.PeerConnectionsPerAddress, l.PeerConnections)
	}
	return "", nil
}

// argBytes is what the kernel counts of a process's arguments and
// environment: every string and its NUL.
func argBytes(argv, env []string) int {
	n := 0
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	return n
}

// CheckRun says whether a run of count processes, each with these
// arguments and environment, is within the limits, given the user's live
// jobs and stored output at this home.
func (l Limits) CheckRun(count int, argv, env []string, live int, spool int64) error {
	per := argBytes(argv, env)
	switch {
	case count > l.RunCount:
		return fmt.Errorf("-n %d is more than this node allows in one run (%d, limits.run_count)", count, l.RunCount)
	case per > l.ArgBytes:
		return fmt.Errorf("the arguments and environment are %s, more than one job may have (%s, limits.arg_bytes)", size(int64(per)), size(int64(l.ArgBytes)))
	case int64(per)*int64(count) > l.RunBytes:
		return fmt.Errorf("-n %d jobs with %s of arguments and environment each would hold %s, more than one run may (%s, limits.run_bytes)", count, size(int64(per)), size(int64(per)*int64(count)), size(l.RunBytes))
	case live+count > l.LiveJobsPerUser:
		return fmt.Errorf("you have %d jobs not yet ended with this home; %d more would pass the limit of %d (limits.live_jobs_per_user)", live, count, l.LiveJobsPerUser)
	case spool > l.SpoolBytesPerUser:
		return fmt.Errorf("your jobs' output kept here is %s, past the limit of %s (limits.spool_bytes_per_user): remove old jobs with roam purge", size(spool), size(l.SpoolBytesPerUser))
	}
	return nil
}

// RecordsOver is the refusal of records that would bring uid's at this
// home from have to have+more bytes, past the records budget.
func (l Limits) RecordsOver(uid uint32, have, more int64) error {
	if have+more <= l.RecordsBytesPerUser {
		return nil
	}
	return fmt.Errorf("records budget of user %d: %d bytes of job records kept here, %d more would pass %d (limits.records_bytes_per_user): remove ended jobs with roam purge",
		uid, have, more, l.RecordsBytesPerUser)
}

// OutputOver is why a node kills uid's jobs whose output there takes
// used bytes of its disk, if that is past the user's output budget.
func (l Limits) OutputOver(uid uint32, used int64) string {
	if used <= l.OutputBytesPerUser {
		return ""
	}
	return fmt.Sprintf("killed: the output of user %d's jobs on its node passed %s (limits.output_bytes_per_user)", uid, size(l.OutputBytesPerUser))
}

// DiskShort is why the node refuses to write what it could do without
// (a start, a checkpoint file of more bytes) when its state disk has
// free bytes left: nil while the reserve stays whole.
func (l Limits) DiskShort(free, more int64) error {
	if free < 0 || free-more >= l.DiskReserveBytes {
		return nil
	}
	return fmt.Errorf("this node's state disk has %s free, below its reserve of %s (limits.disk_reserve_bytes)", size(max(free, 0)), size(l.DiskReserveBytes))
}

// WatchClosely says whether a node looks at its state disk between two
// holds of its budgets (every few milliseconds rather than at the next
// hold): free bytes free at the last hold, where the disk fell at a rate
// that would take perHold bytes in one hold period, and room what the
// user with the most output there had left of the budget. It does while
// the disk has less than twice its reserve free, or when at that rate a
// few hold periods would use up the rest above the reserve or that
// user's room (jobs writing as fast as they can fill a tmpfs at a GiB a
// second). A disk that stands still, or fills slowly, while every user
// is far from the budget, is looked at only by the holds. Unknown (free
// < 0): never.
func (l Limits) WatchClosely(free, perHold, room int64) bool {
	if free < 0 {
		return false
	}
	if free < 2*l.DiskReserveBytes {
		return true
	}
	return perHold*watchHolds >= min(free-l.DiskReserveBytes, max(room, 0))
}

// watchHolds is how many hold periods of the disk's last fall the room
// left (above the reserve, and a user's output budget) must cover for a
// node to look at its disk at its holds only.
const watchHolds = 8

// HomeOutputShort says whether a home writes no more bytes of its jobs'
// output to its state disk, which has free bytes: it writes none into the
// last half of the disk's reserve. That half is its job table's, which
// must be written for a job's end to be recorded; a disk full of output
// copies recorded none, and the nodes kept theirs, waiting on it. Unknown
// (free < 0): never.
func (l Limits) HomeOutputShort(free, more int64) bool {
	return free >= 0 && free-more < l.DiskReserveBytes/2
}

// ReserveVictims is whose jobs a node kills to win back its state disk's
// reserve when it has free bytes left and used is each user's output in
// the jobs there (those it killed already too: the space comes back only
// once their homes have their output): the users with the most output,
// largest first, until theirs covers what is short. None while the
// reserve is whole, and none when all the jobs' output together would not
// cover it: then something else fills the disk, and killing jobs would
// not stop it. A user whose jobs were killed for it stays first, so that
// others' are not killed for what theirs took.
func (l Limits) ReserveVictims(free int64, used map[uint32]int64) []uint32 {
	short := l.DiskReserveBytes - free
	if free < 0 || short <= 0 {
		return nil
	}
	var all int64
	uids := make([]uint32, 0, len(used))
	for uid, n := range used {
		if n > 0 {
			uids = append(uids, uid)
			all += n
		}
	}
	if all < short {
		return nil
	}
	slices.SortFunc(uids, func(a, b uint32) int { return cmp.Or(cmp.Compare(used[b], used[a]), cmp.Compare(a, b)) })
	var got int64
	for i, uid := range uids {
		if got += used[uid]; got >= short {
			return uids[:i+1]
		}
	}
	return uids
}

// size is a byte count for people.
func size(n int64) string { return api.Bytes(n) }

// Expired picks the ended jobs a home removes at now: those ended longer
// than KeepFinished ago, and each user's oldest past KeepFinishedPerUser.
func (l Limits) Expired(recs []job.Record, now time.Time) []string {
	ended := func(r job.Record) time.Time {
		if r.State == job.StateLost {
			return r.LostAt
		}
		return r.Ended
	}
	byUser := map[uint32][]job.Record{}
	for _, r := range recs {
		if r.Over() {
			byUser[r.UID] = append(byUser[r.UID], r)
		}
	}
	var out []string
	for _, rs := range byUser {
		sort.Slice(rs, func(i, j int) bool {
			if !ended(rs[i]).Equal(ended(rs[j])) {
				return ended(rs[i]).After(ended(rs[j]))
			}
			return rs[i].ID > rs[j].ID
		})
		for i, r := range rs {
			if i >= l.KeepFinishedPerUser || now.Sub(ended(r)) > l.KeepFinished {
				out = append(out, r.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}
