package outbound

// The source's commit: the destination resumes its copy, told how old
// the job's lease is now.

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/api"
	"roam/internal/migrate"
)

// commit tells the destination to resume its copy, and returns the
// steps it took to.
func (o *outMig) commit(r migrate.Record) ([]api.Phase, error) {
	if o.addr == "" {
		addr, err := o.d.members.PeerAddr(r.To)
		if err != nil {
			return nil, err
		}
		o.addr = addr
	}
	var ans peer.MigrateCommitted
	err := o.d.peers.CallAddr(o.addr, http.MethodPost, o.commitQuery(r.MID), nil, &ans)
	return phases.Theirs(ans.Phases, api.SideDest), err
}

// commitQuery is the commit's path: the migration, and how old the job's
// lease is now (peer.CommitLeaseAge), as it was in the header. This node
// renewed it while the job moved (its heartbeats, news.beatMoving), and
// the destination counts from it rather than from the header's age: a
// transfer and a restore that took longer than fence.kill less that age
// would have its fence kill the copy as it came. A recovered run, which
// no longer has the job, says nothing: the header's age stands.
func (o *outMig) commitQuery(mid string) string {
	q := url.Values{"mid": {mid}}
	if o.leased != nil {
		q.Set(peer.CommitLeaseAge, strconv.FormatInt(int64(o.d.leases.LeaseAge(*o.leased)), 10))
	}
	return peer.MigrateCommit + "?" + q.Encode()
}

// watchedDump runs dump, a dump of job id, told to the node's leases
// (Leases.DumpBegins, DumpEnds): a job that dies of its dump is roam's
// loss, which its home restarts from a kept checkpoint.
func (d *Driver) watchedDump(id string, dump func() error) error {
	if d.leases == nil {
		return dump()
	}
	d.leases.DumpBegins(id)
	err := dump()
	if err == nil && d.leases.FenceKilled(id) {
		// Killed in the middle of its dump: CRIU may say it dumped, and
		// the images did not restore on any node (the chaos run). Its
		// home restarts it from the checkpoint it kept before.
		err = fmt.Errorf("job %s was killed by its fence during its dump: its images are not used", id)
	}
	d.leases.DumpEnds(id, err)
	return err
}
