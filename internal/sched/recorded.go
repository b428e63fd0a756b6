package sched

// A scheduling round as an agent recorded it (the agent's package
// decisions writes them; internal/sim replays them through its own
// snapshot builder), and the random sources that keep and give back a
// round's draws.

import (
	"math/rand"
	"time"

	"roam/internal/load"
)

// Recorded is one round as the agent saw and decided it: its inputs,
// raw, the snapshot it built from them, and the moves.
type Recorded struct {
	Node string `json:"node"`
	// Policy is the policy's text (Scheduler.Text), which ParsePolicy
	// builds again.
	Policy string    `json:"policy"`
	Now    time.Time `json:"now"`
	// Self is the node as measured, before Complete (its Least is the
	// round's to measure).
	Self Node `json:"self"`
	// Vector is the load vector's entries, oldest first (load.Vector.At);
	// Members membership's view of each entry's node.
	Vector  []load.Entry        `json:"vector"`
	Members map[string]PeerInfo `json:"members"`
	// Probed are the jobs as the probes saw them; Here the ids of every
	// job running on the node (Ledger.Complete's arguments).
	Probed []Probed `json:"probed"`
	Here   []string `json:"here"`
	// Ledger and Prev are the rounds' memory before the round completed
	// its snapshot: the ledger's state and the jobs' last samples.
	Ledger LedgerState       `json:"ledger"`
	Prev   map[string]Sample `json:"prev"`
	// Draws are what the round's random source gave, in order (Tap).
	Draws []uint64 `json:"draws"`
	// Snapshot is what the agent built from the above; Least what its
	// Complete measured; Moves what the policy decided on the snapshot.
	Snapshot Snapshot `json:"snapshot"`
	Least    float64  `json:"least"`
	Moves    []Move   `json:"moves"`
}

// Tap is a random source that keeps what it gives (Recorded.Draws).
type Tap struct {
	src   rand.Source64
	Draws []uint64
}

// NewTap is a tap on a source seeded with seed.
func NewTap(seed int64) *Tap { return &Tap{src: rand.NewSource(seed).(rand.Source64)} }

func (t *Tap) Int63() int64 {
	v := t.src.Int63()
	t.Draws = append(t.Draws, uint64(v))
	return v
}

func (t *Tap) Uint64() uint64 {
	v := t.src.Uint64()
	t.Draws = append(t.Draws, v)
	return v
}

func (t *Tap) Seed(seed int64) { t.src.Seed(seed) }

// Replay gives recorded draws back in order; past them it counts how
// many more were asked (Over) and gives numbers of a fixed seed's (not
// zeros: rand.Rand's bounded draws would retry zeros for ever).
type Replay struct {
	Draws []uint64
	Next  int
	Over  int
	past  rand.Source64
}

func (r *Replay) Uint64() uint64 {
	if r.Next >= len(r.Draws) {
		if r.past == nil {
			r.past = rand.NewSource(1).(rand.Source64)
		}
		r.Over++
		return r.past.Uint64()
	}
	r.Next++
	return r.Draws[r.Next-1]
}

func (r *Replay) Int63() int64 { return int64(r.Uint64() & (1<<63 - 1)) }
func (r *Replay) Seed(int64)   {}
