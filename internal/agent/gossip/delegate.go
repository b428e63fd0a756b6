package gossip

// memberlist's delegates: this node's metadata and push/pull state, the
// members it hears of, and its log. memberlist calls them from its own
// goroutines: each is thread-safe and must not block.

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/members"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/sched"
)

// NodeMeta is this node's metadata (members.Meta), within limit bytes.
func (g *Gossip) NodeMeta(limit int) []byte {
	m := members.MetaOf(g.c.Host)
	m.Capacity, m.PeerPort, m.Draining, m.Protocol, m.Version = g.c.Capacity, g.c.PeerPort, g.c.Drain.On(), api.Protocol, api.Version
	m.UserNS, m.LazyUserNS, m.FenceKillMS, m.Slurm = g.c.UserNS, g.c.LazyUserNS, g.c.FenceKill.Milliseconds(), g.c.Slurm
	b, _ := json.Marshal(m)
	if len(b) > limit {
		return nil
	}
	return b
}

// Advertise gossips this node's metadata again, once it changed (a
// drain); nothing before Start.
func (g *Gossip) Advertise() {
	if g.ml == nil {
		return
	}
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	g.updateNode()
}

// metaCheck advertises this node's metadata again when memberlist holds
// another for it than NodeMeta says now. memberlist's UpdateNode can lose
// an update: it takes the next incarnation, then applies it; a refute in
// between (this node heard an older version of itself, as after its agent
// restarted) takes a higher one with the old metadata, and UpdateNode's
// lower one is dropped. The members would then see, for instance, a
// resumed node still draining until its next change. Each probe tick
// checks; the update runs beside the loop (it waits for a broadcast),
// under metaMu, as every UpdateNode of this node does: memberlist writes
// the metadata it holds in UpdateNode alone (a refute only re-sends it).
func (g *Gossip) metaCheck() {
	if g.ml == nil || !g.metaMu.TryLock() {
		return // an update runs: the next tick looks again
	}
	select {
	case <-g.c.Stop:
		g.metaMu.Unlock()
		return
	default:
	}
	want := g.NodeMeta(memberlist.MetaMaxSize)
	if bytes.Equal(g.ml.LocalNode().Meta, want) {
		g.metaMu.Unlock()
		return
	}
	g.c.Log.Info("gossip: advertising the node's metadata again", "meta", string(want))
	g.c.Group.Add(1) // loadLoop, which calls this, holds the group open
	go func() {
		defer g.c.Group.Done()
		defer g.metaMu.Unlock()
		g.updateNode()
	}()
}

// updateNode gossips this node's metadata; metaMu held.
func (g *Gossip) updateNode() {
	if err := g.ml.UpdateNode(time.Second); err != nil {
		g.c.Log.Warn("gossip: the node's state did not reach every member yet", "err", err)
	}
}

// GetBroadcasts has nothing to broadcast: the load goes by NotifyMsg's
// messages, the metadata by memberlist's own.
func (g *Gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is what memberlist's push/pull exchange (at join, then every
// pushPullInterval) carries of this node: the policy loaded with `roam
// policy load`, if one was. So a node that was down when it was loaded,
// restarts, or joins later takes it from the first peer it syncs with.
func (g *Gossip) LocalState(join bool) []byte {
	p := g.c.Rounds.Policy()
	if p.Version == 0 {
		return nil
	}
	b, _ := json.Marshal(api.PolicyRequest{Text: p.Text(), At: p.At, Version: p.Version})
	return b
}

// MergeRemoteState takes a peer's policy when it was loaded later than
// this node's. The input comes from the network: one that does not decode
// or parse is logged and changes nothing.
func (g *Gossip) MergeRemoteState(buf []byte, join bool) {
	if len(buf) == 0 {
		return
	}
	var st api.PolicyRequest
	if err := json.Unmarshal(buf, &st); err != nil || st.Version == 0 || st.Version > rounds.MaxPolicyVersion {
		g.c.Log.Warn("gossip: a peer's policy state is unreadable", "err", err, "version", st.Version)
		return
	}
	if cur := g.c.Rounds.Policy(); !rounds.Newer(st.Version, st.Text, cur.Version, cur.Text()) {
		return
	}
	p, err := sched.ParsePolicy([]byte(st.Text))
	if err != nil {
		g.c.Log.Warn("gossip: a peer's policy does not parse", "err", err)
		return
	}
	if g.c.Sched.SetPolicy(p, st.Version, st.At) {
		g.c.Log.Info("policy taken from the cluster", "policy", p.Policy.Name, "loaded", st.At)
	}
}

// NotifyAlive refuses a member whose agent speaks another protocol
// (api.Protocol): it could not serve this agent's peer calls, nor this
// agent its. memberlist then leaves it out, and it this node.
func (g *Gossip) NotifyAlive(n *memberlist.Node) error {
	if n.Name == g.c.Node {
		return nil
	}
	if err := members.CheckProtocol(n.Name, n.Meta); err != nil {
		g.c.Counters.Rejected.Add(1)
		g.c.Log.Warn("gossip: member refused", "member", n.Name, "err", err)
		return err
	}
	return nil
}

// NotifyJoin and NotifyUpdate take a member's address and metadata.
func (g *Gossip) NotifyJoin(n *memberlist.Node)   { g.memberUp(n) }
func (g *Gossip) NotifyUpdate(n *memberlist.Node) { g.memberUp(n) }

// NotifyLeave marks a member that left or died, and wakes the lost-job
// sweep (Config.Left).
func (g *Gossip) NotifyLeave(n *memberlist.Node) {
	g.c.Members.Down(n.Name, time.Now())
	g.c.Log.Info("member down", "member", n.Name)
	g.c.Left()
}

func (g *Gossip) memberUp(n *memberlist.Node) {
	ch := g.c.Members.Up(n.Name, n.Address(), n.Addr, n.Meta, time.Now())
	if ch.New {
		g.c.Log.Info("member up", "member", n.Name, "addr", n.Address())
	}
	if ch.Draining {
		g.c.Log.Info("member draining", "member", n.Name, "draining", members.ParseMeta(n.Meta).Draining)
	}
}

// mlLog receives memberlist's log lines. memberlist reports refused input
// (packets that fail to decrypt — a sender without the cluster secret —,
// bad checksums, truncated or undecodable messages) only through its logger,
// so this is where they are counted.
type mlLog struct{ g *Gossip }

// rejectMarks are the substrings of memberlist's log lines that mean a
// packet or stream from the network was refused.
var rejectMarks = []string{
	"Decrypt packet failed", "failed to receive", "Failed to receive",
	"Failed to decode", "invalid checksum", "missing message type",
	"not supported", "Received invalid msgType", "unacceptable label",
	"Failed to read remote state", "Failed push/pull merge", "truncated messages",
}

func (l *mlLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	log := l.g.c.Log
	for _, m := range rejectMarks {
		if strings.Contains(line, m) {
			l.g.c.Counters.Rejected.Add(1)
			log.Warn("gossip refused", "detail", line)
			return len(p), nil
		}
	}
	if strings.Contains(line, "[ERR]") || strings.Contains(line, "[WARN]") {
		log.Warn("memberlist", "detail", line)
	} else {
		log.Debug("memberlist", "detail", line)
	}
	return len(p), nil
}
