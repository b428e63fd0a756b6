package peer

// The wire of a migration between two agents (the source's driver,
// package outbound, and the destination's, package inbound): its id, the
// requests and answers of its routes, and how long either end waits for
// the other.

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/migrate"
	"roam/internal/resources"
)

const (
	// StallTimeout ends a transfer that makes no progress this long (a
	// link down, a peer gone).
	StallTimeout = 5 * time.Second
	// RestoreTimeout bounds the wait for the destination's "ready" once
	// all bytes are sent.
	RestoreTimeout = 60 * time.Second
	// MigrateTimeout bounds a whole migration asked of another node.
	MigrateTimeout = 15 * time.Minute
)

// NewMID is a new migration id (migrate.ValidMID's form), made by the
// node that starts the run: a migration's source, a checkpoint's, a
// restart's.
func NewMID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// MigrateOutRequest is MigrateOut: move a job running on the node asked
// to node To.
type MigrateOutRequest struct {
	ID string `json:"id"`
	To string `json:"to"`
	// Why is the policy's reason; empty for `roam migrate`.
	Why    string `json:"why,omitempty"`
	Lazy   bool   `json:"lazy,omitempty"`
	Manual bool   `json:"manual,omitempty"`
}

// MigrateCheckRequest asks a destination whether it can take a job: its
// open files reachable there, no copy of it there already; and, eager, to
// open a page sink for the dump.
type MigrateCheckRequest struct {
	MID  string `json:"mid"`
	From string `json:"from"`
	ID   string `json:"id"`
	// Files are the job's open files, mapped files, program, deleted
	// files and working directories, which the destination opens as
	// Owner (its regular files for the restore to hand CRIU, by their
	// keys; its directories for CRIU to reopen by path).
	Files []migrate.OpenFile `json:"opened"`
	Owner *asuser.Cred       `json:"owner"`
	Lazy  bool               `json:"lazy,omitempty"`
	// Late: the files are those the frozen job holds and the first check
	// of migration MID did not list (the job opened them since); the
	// destination checks them as the first ones and adds them to what its
	// restore compares the restored job's files with and hands CRIU.
	Late bool `json:"late,omitempty"`
	// Req is the job's resource request: the destination refuses, before
	// the job is frozen, a job its memory has no room for (the stream's
	// header carries it again, which the destination holds it to).
	Req resources.Request `json:"req,omitzero"`
}

// MigrateReady is the destination's answer to the stream: a stopped copy
// is restored.
type MigrateReady struct {
	RestoreMS float64 `json:"restore_ms"`
	// SettleMS is from the end of the restore to the answer: the check
	// of the restored tasks' credentials and the durable ledger record.
	SettleMS float64 `json:"settle_ms"`
	// Phases are the destination's steps from the stream's header on.
	Phases []api.Phase `json:"phases,omitempty"`
}

// MigrateCommitted is the destination's answer to a commit: the steps it
// took to resume the copy.
type MigrateCommitted struct {
	Phases []api.Phase `json:"phases,omitempty"`
}

// MigrateOutcomeAnswer is the source's answer to MigrateOutcome: how the
// migration ended there (a migrate.Outcome).
type MigrateOutcomeAnswer struct {
	Outcome string `json:"outcome"`
}

// CommitLeaseAge is MigrateCommit's query of how old the job's lease on
// its source was as the source committed, in nanoseconds: the header's
// LeaseAge (migrate.Header), renewed by the source's heartbeats while the
// job moved.
const CommitLeaseAge = "lease_age"
