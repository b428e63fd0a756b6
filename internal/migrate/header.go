package migrate

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"roam/internal/cpufeat"
	"roam/internal/resources"
	"roam/internal/slurm"
)

// MaxHeader bounds a migration stream's header line.
const MaxHeader = 1 << 20

// MaxGroups is the kernel's NGROUPS_MAX.
const MaxGroups = 65536

// Header is the first line of a migration stream (JSON).
type Header struct {
	MID      string   `json:"mid"`
	From     string   `json:"from"`
	ID       string   `json:"id"`
	Home     string   `json:"home"`
	HomeAddr string   `json:"home_addr"`
	AckOut   int64    `json:"ack_out"`
	AckErr   int64    `json:"ack_err"`
	Mounts   []string `json:"mounts"`
	// UID, GID and Groups are the job's owner's: the restored processes
	// must run as them.
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// Lazy: the images hold no memory pages; the destination fetches them
	// from the source's CRIU page server.
	Lazy bool `json:"lazy,omitempty"`
	// Streamed: the dump wrote its pages to the destination's page sink
	// for the migration; the stream has the rest.
	Streamed bool `json:"streamed,omitempty"`
	// What the scheduler needs of the job: when it started, why no policy
	// may move it, and its moves so far (this one not counted).
	Started   time.Time `json:"started"`
	Hold      Hold      `json:"hold,omitempty"`
	Moves     int       `json:"moves,omitempty"`
	LastMoved time.Time `json:"last_moved"`
	// StdinKey is the job's stdin pipe ("pipe:[INODE]") when the user's
	// stdin still flows to it: the destination re-attaches a new pipe.
	StdinKey string `json:"stdin_key,omitempty"`
	// Stopped are the job's processes that were stopped (SIGSTOP, ^Z)
	// before the migration, by their pid in the job's namespace: the
	// destination resumes all but them.
	Stopped []int `json:"stopped,omitempty"`
	// Inc is the job's incarnation: 0 until it is first restarted from
	// a checkpoint, one more at each restart. Its home takes news of the
	// current incarnation only: an older copy, come back with a node that
	// was cut off, is ended and its output and status are dropped.
	Inc int `json:"inc,omitempty"`
	// CheckpointEvery is the job's periodic checkpoint interval (roam run
	// --checkpoint-every); zero for none.
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	// CPUBefore is the CPU time, in seconds, the job has had on every node
	// it ran on until this move or checkpoint (job.Local.CPUBefore).
	CPUBefore float64 `json:"cpu_before,omitempty"`
	// PeakMB is the highest peak memory, in MiB, of the job's cgroups on
	// the nodes it ran on until this move or checkpoint.
	PeakMB float64 `json:"peak_mb,omitempty"`
	// Req is the job's resource request (roam run --cpus, --mem): the
	// destination gives its cgroup the same limits, and takes it only
	// with room for its memory. Zero from an older roam: no limits.
	Req resources.Request `json:"req,omitzero"`
	// CPU is what the CPU the job's program started on offers
	// (job.Local.CPU): the destination keeps it, and refuses the move
	// when its own CPU lacks any of it (sched.Admit). Zero from an older
	// roam: unknown.
	CPU cpufeat.Set `json:"cpu,omitzero"`
	// LeaseAge is how long ago the source last reached the job's home,
	// by its clock, as the header was written (package fence): the
	// destination holds the job's lease to no newer until the home has
	// taken news of it from there. Zero for a job without a lease.
	LeaseAge time.Duration `json:"lease_age,omitempty"`
	// Checkpointed: a file its owner holds could restart the job
	// (job.Local.Checkpointed).
	Checkpointed bool `json:"checkpointed,omitempty"`
	// Slurm and Within are the Slurm job the job serves and the nodes it
	// may run on (job.Local's): the destination must be one of them, and
	// restores it into the Slurm job's extern step there.
	Slurm  string   `json:"slurm,omitempty"`
	Within []string `json:"within,omitempty"`
}

// MaxLeaseAge bounds a header's lease age: a lease older than a day
// would have been killed at its source long before.
const MaxLeaseAge = 24 * time.Hour

// MaxPeakMB bounds a header's peak memory (Header.PeakMB): a tebibyte.
const MaxPeakMB = 1 << 20

// MaxCheckpointEvery bounds a periodic checkpoint interval; the least is
// MinCheckpointEvery.
const (
	MinCheckpointEvery = time.Second
	MaxCheckpointEvery = 366 * 24 * time.Hour
)

// ValidEvery says whether d is a periodic checkpoint interval (0: none).
func ValidEvery(d time.Duration) bool {
	return d == 0 || (d >= MinCheckpointEvery && d <= MaxCheckpointEvery)
}

// MaxCPUBefore bounds a header's CPU time (Header.CPUBefore), in seconds:
// a thousand years of a CPU, as the load message's (load.MaxLeast).
const MaxCPUBefore = 3.2e10

// MaxStopped bounds a header's list of stopped processes (a job's
// namespace holds at most the kernel's pid_max, 4 million, of them).
const MaxStopped = 1 << 16

// Hold is why no policy may move a job.
type Hold string

const (
	HoldNone   Hold = ""       // the policies may move it
	HoldPin    Hold = "pin"    // roam run --pin: never moves
	HoldManual Hold = "manual" // moved by hand: stays until roam migrate JOBID auto
)

// ErrBadHeader is the kind of every header error.
var ErrBadHeader = errors.New("bad migration header")

var (
	midPattern     = regexp.MustCompile(`^[0-9a-f]{16}$`)
	pipeKeyPattern = regexp.MustCompile(`^pipe:\[[0-9]+\]$`)
	// nodePattern is a node id (the agent's config says the same): it
	// names directories, so no slash and no leading dot.
	nodePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)
)

// ValidMID says s is a migration id.
func ValidMID(s string) bool { return midPattern.MatchString(s) }

// JobHome is the home node of a job id ("HOME.SEQ").
func JobHome(id string) (string, bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 || i == len(id)-1 {
		return "", false
	}
	if _, err := strconv.ParseUint(id[i+1:], 10, 64); err != nil || !nodePattern.MatchString(id[:i]) {
		return "", false
	}
	return id[:i], true
}

// JobSeq is a job id's home node and its number in the home's job
// sequence ("HOME.SEQ").
func JobSeq(id string) (home string, seq uint64, ok bool) {
	home, ok = JobHome(id)
	if !ok {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[len(home)+1:], 10, 64)
	return home, seq, err == nil
}

// Validate checks everything a destination relies on in a header from the
// network.
func (h Header) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrBadHeader}, a...)...) }
	if !ValidMID(h.MID) {
		return bad("mid %q", h.MID)
	}
	if home, ok := JobHome(h.ID); !ok || home != h.Home {
		return bad("job id %q", h.ID)
	}
	if !nodePattern.MatchString(h.From) {
		return bad("source node %q", h.From)
	}
	if _, err := netip.ParseAddrPort(h.HomeAddr); err != nil {
		return bad("home address %q", h.HomeAddr)
	}
	for _, m := range h.Mounts {
		if !strings.HasPrefix(m, "/") || path.Clean(m) != m || strings.ContainsAny(m, "[]") || !utf8.ValidString(m) {
			return bad("mount %q", m)
		}
	}
	if h.Hold != HoldNone && h.Hold != HoldPin && h.Hold != HoldManual {
		return bad("hold %q", h.Hold)
	}
	if h.Lazy && h.Streamed {
		return bad("lazy and streamed at once")
	}
	if h.StdinKey != "" && !pipeKeyPattern.MatchString(h.StdinKey) {
		return bad("stdin %q", h.StdinKey)
	}
	if len(h.Groups) > MaxGroups {
		return bad("%d supplementary groups", len(h.Groups))
	}
	if h.AckOut < 0 || h.AckErr < 0 || h.Moves < 0 || h.Inc < 0 {
		return bad("negative offset or count")
	}
	if !ValidEvery(h.CheckpointEvery) {
		return bad("checkpoint interval %v", h.CheckpointEvery)
	}
	if !(h.PeakMB >= 0 && h.PeakMB <= MaxPeakMB) {
		return bad("peak memory %v", h.PeakMB)
	}
	if !(h.CPUBefore >= 0 && h.CPUBefore <= MaxCPUBefore) {
		return bad("cpu time %v", h.CPUBefore)
	}
	if err := h.Req.Check(); err != nil {
		return bad("%v", err)
	}
	if h.LeaseAge < 0 || h.LeaseAge > MaxLeaseAge {
		return bad("lease age %v", h.LeaseAge)
	}
	if (h.Slurm != "" && slurm.ValidJobID(h.Slurm) != nil) || (h.Slurm == "") != (len(h.Within) == 0) || len(h.Within) > slurm.MaxNodes {
		return bad("Slurm job %q with %d nodes", h.Slurm, len(h.Within))
	}
	for _, n := range h.Within {
		if !nodePattern.MatchString(n) {
			return bad("Slurm job's node %q", n)
		}
	}
	if len(h.Stopped) > MaxStopped {
		return bad("%d stopped processes", len(h.Stopped))
	}
	for _, p := range h.Stopped {
		if p < 1 || p > 1<<22 {
			return bad("stopped process %d", p)
		}
	}
	return nil
}
