package agent

import "roam/internal/lockorder"

// The agent's owners: each mutable state has one, with its own lock and
// a small method set; the others call its methods and get copies. None
// exports its lock or runs a function it is handed under it, with two
// exceptions, each in the lock order below: the drain calls its
// Config's Event and Advertise under drain.mu (so that the members hear
// its changes in order), and an incoming migration's step calls its
// driver's Config funcs (Draining, CPUHere, Event) under the migration's
// lock.
//
//	owner                  state                                    package / files
//	job table              home and local records, their bbolt      jobtable
//	                       writes, claims, restarts' marks, the
//	                       room held, why pending jobs wait, what
//	                       each user's records cost (job.Ledger)
//	migrations in flight   coming migrations, where jobs went,      moves
//	                       page sinks, lazy dumps, checks' findings
//	spools                 the home jobs' output                    spool
//	output files           what of each home job's output its       outfiles
//	                       --output/--error files have; the copy
//	relay of jobs' news    none of its own: it carries output,      news
//	                       exit, stdin and loss between a job's
//	                       node and its home, and removes ended jobs
//	fencing                homes last reached, the jobs' leases     fencing
//	keeper                 the checkpoint files held here, each     keeper
//	                       user's budgets of them
//	scheduling rounds      the policy, the ledger, the samples,     rounds
//	                       the events log
//	scheduler              the least CPU time the last round        scheduler
//	                       measured; the rounds' moves, admissions,
//	                       policy loads, `roam events`
//	drain                  the node's drain state, its copy in      scheduler (Drain)
//	                       the store
//	gossip                 memberlist, the node's metadata, the     gossip
//	                       load messages, the join and load loops
//	members                membership, the load vector              members
//	peer client            peer routes, the wire's errors           peer
//	request rates          the API's per-user rates                 limits
//	checkpoints            none: takes, keeps and restarts jobs'    checkpoints
//	                       checkpoints through the owners above
//	migration drivers      each migration's and checkpoint's run    outbound, inbound
//	                       here: leaving (its goroutine), coming    (pages, drive)
//	                       (its lock), restarts; the page streams
//
// Packages that hold no state of their own carry out a concern over the
// owners above: launch (roam run), control (roam kill, roam ps, a job's
// record at its home), news (the relay), checkpoints, outbound and inbound
// (the migration drivers, over pages' streams and drive's loop); httpx,
// transport and stats are the agent's edges and counters.
//
// Who calls whom: the routes (routes.go, the one table) call the concerns'
// types directly; memberlist calls the gossip, which calls the members
// table, the rounds, the scheduler, the drain and the job table; the loops
// (the relay's, the checkpoints', the rounds', the gossip's, launch's queue
// of pending jobs, the output files' copy) run on their own. What a concern
// needs of another comes as a func of its Config, made in wire.go over the
// agent and read at each call. The drivers of the migration machines
// (package outbound: migrate.Source, for a migration leaving and a
// checkpoint; package inbound: migrate.Dest, for a migration coming and a
// restart; both through drive.Loop) carry out what package migrate decides,
// through the job table, the moves, the keeper, the page streams and the
// peer client; package checkpoints starts a checkpoint or a restart through
// them, the scheduler a move. The agent itself is the wiring (agent.go,
// wire.go), the servers (server.go) and the route table: no owner calls it,
// and no sub-package imports it (test/layout).

// The agent's locks, outermost first: a goroutine that holds one takes only
// locks further down this list, never one above it nor a second of the same
// line. Built with the tag lockcheck, every lock checks this as it is taken
// (package lockorder), and the tests fail on any other order (TestMain).
// limits.Rates' lock, rounds.Events', outfiles.Writer's and fencing.Leases'
// are leaves: nothing is taken while one is held; the packages without
// state hold none. The load vector has no lock of its own: it is under the
// members table's.
const (
	// rankDrain is the drain's lock (scheduler.Drain): a drain's change
	// of the node's state, with its copy in the store and the
	// gossiped metadata (it calls the gossip's Advertise, which takes
	// metaMu, with it held, so the members hear the changes in order).
	rankDrain lockorder.Rank = iota + 1
	// rankMeta is the gossip's metaMu (package gossip): a
	// re-advertisement of this node's metadata (memberlist's UpdateNode,
	// which calls back into NodeMeta).
	rankMeta
	// rankStore is the keeper's lock (package keeper): a change of the
	// checkpoints kept here.
	rankStore
	// rankMigration is an incoming migration's lock
	// (inbound.Migration.mu): one step of its machine at a time.
	rankMigration
	// rankJobs is jobs.mu: the job table in memory.
	rankJobs
	// rankMoves is the migrations in flight's lock (package moves): the
	// coming migrations, where jobs went, the page sinks and lazy dumps,
	// the checks' findings. Below a migration's lock, whose step drops a
	// sink or forgets its migration; below jobs.mu, which a job's leaving
	// and arriving hold while they record where it went (jobtable), so
	// that `roam kill` finds the job here or where it went at every
	// moment. A leaf: nothing is taken under it.
	rankMoves
	// rankSpool is a home job's spool lock (package spool). Taken alone
	// to write a spool, and under jobs.mu by a restart's consent, which
	// cuts the spool back to its checkpoint as it changes the record.
	rankSpool
	// rankSched is the scheduling rounds' lock (package rounds): the
	// policy, the ledger, the jobs' samples.
	rankSched
	// rankMembers is the members table's lock (package members): the
	// membership, the load vector, the node's own load.
	rankMembers
)
