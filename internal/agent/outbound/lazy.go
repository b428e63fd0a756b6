package outbound

import (
	"roam/internal/cpufeat"
	"roam/internal/errkind"

	"roam/internal/agent/members"
	"roam/internal/agent/peer"
	"roam/internal/procfs"
)

// eagerInstead makes a lazy migration of the job whose roam-init is pid
// eager where the destination cannot restore it lazily (lazyTo), and says
// why; "" when req stays as it is.
func (d *Driver) eagerInstead(req *peer.MigrateOutRequest, pid int) string {
	if !req.Lazy {
		return ""
	}
	dest, _ := d.members.Get(req.To)
	lazy, why := lazyTo(req.To, procfs.OwnUserNS(pid), dest)
	if lazy {
		return ""
	}
	d.log.Info("migration made eager", "job", req.ID, "to", req.To, "why", why)
	req.Lazy = false
	return why
}

// lazyTo says whether a lazy migration of a job to node to can be lazy,
// and if not why: a job in a user namespace of its own is restored lazily
// only by a CRIU that can make the job's userfaultfd inside that namespace
// (dest.LazyUserNS, from its metadata: ckpt.LazyInUserNS there); elsewhere
// it moves eagerly, which every CRIU restores.
func lazyTo(to string, ownUserNS bool, dest members.Member) (bool, string) {
	if !ownUserNS || dest.LazyUserNS {
		return true, ""
	}
	return false, "eager: node " + to + " cannot restore a job lazily in its own user namespace"
}

// restorableAt refuses a move of a job to node to that node cannot
// restore: a job in a user namespace of its own (a user's job where its
// node allows them) only goes to a node whose users' jobs run in user
// namespaces too (dest.UserNS, from its metadata); one that forbids them
// (user.max_user_namespaces 0) refuses CRIU's namespace as it refuses the
// agent's, after the whole dump and transfer. And a job goes only to a
// node whose CPU has every feature of the one it started on, image
// (cpufeat): its program may use any of them, and CRIU would refuse the
// restore after the job was frozen and sent, or the job would die of
// SIGILL. A node not known yet is left to the destination's own check.
func restorableAt(to string, ownUserNS bool, image cpufeat.Set, dest members.Member, known bool) error {
	if !known {
		return nil
	}
	if err := cpufeat.Check(image, dest.Host.CPU, to); err != nil {
		return errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if !ownUserNS || dest.UserNS {
		return nil
	}
	return errkind.New(peer.ErrBadRequest, "node %s cannot restore a job in a user namespace of its own: its host forbids user namespaces (roam nodes: USER-JOBS)", to)
}
