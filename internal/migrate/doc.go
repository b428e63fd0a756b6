// Package migrate is roam's live-migration protocol as two pure step
// machines, one for the node a job leaves (Source) and one for the node it
// goes to (Dest), plus what both sides must agree on: the stream's header
// and archive format, and the rules that pin a job to its node.
//
// It does no I/O: no os, net, exec, syscall or wall clock (a test enforces
// it). Each machine takes an event and the time now, and returns the
// actions its driver must carry out in order: the agent on real CRIU and
// TLS, the harness of the tests on a fake checkpointer and an in-memory
// network. Every action that ends with a result is answered by the driver
// with the matching event.
//
// # The protocol
//
//	source                                           destination
//	Checking   pins? ─ SendCheck ───────────────────▶ files reachable? page sink open
//	           ◀──────────────────────────── ok ───── SinkOpen
//	Dumping    Persist(pending); Dump: job frozen,
//	           its pages go to the sink as CRIU dumps
//	Sending    SendImages: header + archive ────────▶ Receiving: Persist(receiving)
//	                                                  Restoring: restore, stopped
//	           ◀────────────────────────── ready ──── Stopped: Persist(stopped, pid)
//	Committing Persist(committed)  ← the decision
//	           Kill the stopped copy; wait until gone
//	           SendCommit ──────────────────────────▶ Persist(committed); Adopt; Resume
//	           ◀────────────────────────────── ack ── Committed
//	           NoteHome(ok) → Done
//
// A lazy (post-copy) migration dumps no pages: CRIU's page server on the
// source serves them, so the source's stopped copy cannot be killed before
// the last page is taken. It commits first (PostCopy), and kills its copy
// once the page server has ended.
//
// Any failure before the decision (a pin, the destination's refusal, a
// dump error, the destination gone or stalled, a restore error, no
// "ready") aborts: Persist(aborted), Thaw the source copy, SendAbort
// (best effort), NoteHome(failed). A destination that holds a stopped copy
// and hears nothing asks the source for the outcome after CommitWait, and
// every AskEvery after, for as long as it takes; it resumes its copy only
// on "committed" and discards it on "aborted" or "unknown".
//
// # The file endpoints
//
// A checkpoint is a source run whose destination is a sealed file
// (Start with Target TargetFile; source_file.go), a restart a destination
// run whose source is one (Restart; dest_file.go):
//
//	checkpoint                               restart
//	Checking   pins? (CheckLocal)            Verifying  Persist; Verify: seal, META
//	Dumping    Persist(pending); Dump        Consent    Persist; AskConsent: the home
//	Writing    Thaw (unless Stop);                      says it runs nowhere, marks
//	           WriteFile: a temporary name              it restarting (refused: abort)
//	Sealing    SealFile: renamed into place  Receiving  Persist; Receive: unpack
//	Delivering Deliver                       Restoring  Persist; Restore: stopped
//	           Persist(committed); Stop:     Stopped    Persist; CommitAtHome
//	           Kill the frozen job                      Persist(committed); Adopt;
//	           NoteHome(ok) → Done                      Resume
//
// A checkpoint that fails before its file is delivered persists
// "aborted", thaws the job and removes the file (RemoveFile); a restart
// that fails discards what it has and tells a home that may have
// consented (TellHome, until it has). For a restart the job's home
// decides, as a migration's source does: the restored copy resumes only
// on the home's "committed", asked again until it answers.
//
// # The invariant
//
// At most one running copy of a job at every moment: the destination's copy
// runs only after the source persisted "committed", and the source kills
// its copy (or, lazy, keeps it stopped) before it says so; the source thaws
// its copy only after it persisted "aborted", and then never commits. A
// checkpoint makes no second copy: its job, frozen or running, is the
// only one, killed (Stop) only once "committed" is persisted, never
// thawed after; its file is whole and sealed under its final name (a
// rename of a whole file) or absent (removed on every abort, a restarted
// agent's included). A restart restores and resumes only with the
// consent of the job's home, which it gives only to a job that runs
// nowhere and no other restart holds, and commits only once.
//
// At least one copy at every moment, outside one window: from the source's
// kill (eager) until the destination has resumed, the only copy is the
// destination's stopped one, so losing the destination node itself (not
// just its agent) in that window loses the job; and for a lazy migration,
// from the commit until the last page has left the source, losing the
// source node loses the job. Agent crashes do not open the window: both
// sides persist before they act, and a restarted agent finishes every
// migration it finds (Recover): a source that had not decided aborts and
// thaws; one that had decided "committed" never thaws, it kills its copy
// and commits; a destination with a stopped copy asks the source; one
// still receiving or restoring discards what it has. Likewise a checkpoint
// not decided aborts (thaws, removes the file), and a restart without a
// stopped copy discards and tells the home; with one, it asks the home.
//
// # Retention
//
// The source's decisions are kept until the destination acknowledged the
// outcome and the home node has the migration, and Retention more (to
// answer duplicated or late messages), or MaxAge at most (Expired). A
// destination's records likewise (DestExpired); a failed restart's is kept
// until its home was told.
package migrate
