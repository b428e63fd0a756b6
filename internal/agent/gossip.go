package agent

import (
	"bytes"
	"encoding/json"
	"log"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/members"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/sched"
)

// memberlistConfig is memberlist's config for this agent: its name and
// addresses, the cluster's gossip key, the failure detection's timing,
// and the agent as its delegates.
func memberlistConfig(a *Agent) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = a.cfg.NodeID
	mc.BindAddr = a.cfg.BindAddr
	mc.BindPort = a.cfg.GossipPort
	mc.AdvertiseAddr = a.adv
	mc.AdvertisePort = a.cfg.GossipPort
	mc.SecretKey = a.parts.GossipKey
	mc.Transport = a.parts.Gossip
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	mc.SuspicionMult = suspicionMult
	mc.SuspicionMaxTimeoutMult = suspicionMaxMult
	mc.PushPullInterval = pushPullInterval
	mc.Delegate = (*delegate)(a)
	mc.Events = (*events)(a)
	mc.Alive = (*alive)(a)
	mc.Logger = log.New(&mlLog{a}, "", 0)
	return mc
}

// delegate is memberlist's Delegate. memberlist calls it from its own
// goroutines: each method must be thread-safe and must not block.
type delegate Agent

func (d *delegate) NodeMeta(limit int) []byte {
	b, _ := json.Marshal(members.Meta{Capacity: d.capacity, PeerPort: d.cfg.PeerPort, Draining: d.draining.Load(), Protocol: api.Protocol, Version: api.Version})
	if len(b) > limit {
		return nil
	}
	return b
}

// metaCheck advertises this node's metadata again when memberlist holds
// another for it than NodeMeta says now. memberlist's UpdateNode can lose
// an update: it takes the next incarnation, then applies it; a refute in
// between (this node heard an older version of itself, as after its agent
// restarted) takes a higher one with the old metadata, and UpdateNode's
// lower one is dropped. The members would then see, for instance, a
// resumed node still draining until its next change. Each probe tick
// checks; the update runs beside the loop (it waits for a broadcast),
// under metaMu, as every UpdateNode of this agent does: memberlist writes
// the metadata it holds in UpdateNode alone (a refute only re-sends it).
func (a *Agent) metaCheck() {
	if a.ml == nil || !a.metaMu.TryLock() {
		return // an update runs: the next tick looks again
	}
	select {
	case <-a.stop:
		a.metaMu.Unlock()
		return
	default:
	}
	want := (*delegate)(a).NodeMeta(memberlist.MetaMaxSize)
	if bytes.Equal(a.ml.LocalNode().Meta, want) {
		a.metaMu.Unlock()
		return
	}
	a.log.Info("gossip: advertising the node's metadata again", "meta", string(want))
	a.wg.Add(1) // loadLoop, which calls this, holds the group open
	go func() {
		defer a.wg.Done()
		defer a.metaMu.Unlock()
		a.updateNode()
	}()
}

// updateNode gossips this node's metadata; metaMu held.
func (a *Agent) updateNode() {
	if err := a.ml.UpdateNode(time.Second); err != nil {
		a.log.Warn("gossip: the node's state did not reach every member yet", "err", err)
	}
}

// NotifyMsg gets a load message. memberlist may reuse b after the call, and
// handleLoadMessage does not keep it.
func (d *delegate) NotifyMsg(b []byte) { (*Agent)(d).handleLoadMessage(b) }

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is what memberlist's push/pull exchange (at join, then every
// 30 s) carries of this node: the policy loaded with `roam policy load`,
// if one was. So a node that was down when it was loaded, restarts, or
// joins later takes it from the first peer it syncs with.
func (d *delegate) LocalState(join bool) []byte {
	a := (*Agent)(d)
	p := a.rounds.Policy()
	if p.Version == 0 {
		return nil
	}
	b, _ := json.Marshal(api.PolicyRequest{Text: p.Text(), At: p.At, Version: p.Version})
	return b
}

// MergeRemoteState takes a peer's policy when it was loaded later than
// this node's. The input comes from the network: one that does not decode
// or parse is logged and changes nothing.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	a := (*Agent)(d)
	if len(buf) == 0 {
		return
	}
	var st api.PolicyRequest
	if err := json.Unmarshal(buf, &st); err != nil || st.Version == 0 || st.Version > rounds.MaxPolicyVersion {
		a.log.Warn("gossip: a peer's policy state is unreadable", "err", err, "version", st.Version)
		return
	}
	if cur := a.rounds.Policy(); !rounds.Newer(st.Version, st.Text, cur.Version, cur.Text()) {
		return
	}
	p, err := sched.ParsePolicy([]byte(st.Text))
	if err != nil {
		a.log.Warn("gossip: a peer's policy does not parse", "err", err)
		return
	}
	if a.setPolicy(p, st.Version, st.At) {
		a.log.Info("policy taken from the cluster", "policy", p.Policy.Name, "loaded", st.At)
	}
}

// alive is memberlist's AliveDelegate: thread-safe, must not block.
type alive Agent

// NotifyAlive refuses a member whose agent speaks another protocol
// (api.Protocol): it could not serve this agent's peer calls, nor this
// agent its. memberlist then leaves it out, and it this node.
func (al *alive) NotifyAlive(n *memberlist.Node) error {
	a := (*Agent)(al)
	if n.Name == a.cfg.NodeID {
		return nil
	}
	if err := members.CheckProtocol(n.Name, n.Meta); err != nil {
		a.stats.gossipRejected.Add(1)
		a.log.Warn("gossip: member refused", "member", n.Name, "err", err)
		return err
	}
	return nil
}

// events is memberlist's EventDelegate: thread-safe, must not block.
type events Agent

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Agent)(e).memberUp(n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Agent)(e).memberUp(n) }

func (e *events) NotifyLeave(n *memberlist.Node) {
	a := (*Agent)(e)
	a.members.Down(n.Name, time.Now())
	a.log.Info("member down", "member", n.Name)
	// memberlist's callbacks must not block: the sweep runs beside them.
	select {
	case a.memberLeft <- struct{}{}:
	default:
	}
}

func (a *Agent) memberUp(n *memberlist.Node) {
	ch := a.members.Up(n.Name, n.Address(), n.Addr, n.Meta, time.Now())
	if ch.New {
		a.log.Info("member up", "member", n.Name, "addr", n.Address())
	}
	if ch.Draining {
		a.log.Info("member draining", "member", n.Name, "draining", members.ParseMeta(n.Meta).Draining)
	}
}

// mlLog receives memberlist's log lines. memberlist reports refused input
// (packets that fail to decrypt — a sender without the cluster secret —,
// bad checksums, truncated or undecodable messages) only through its logger,
// so this is where they are counted.
type mlLog struct{ a *Agent }

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
	for _, m := range rejectMarks {
		if strings.Contains(line, m) {
			l.a.stats.gossipRejected.Add(1)
			l.a.log.Warn("gossip refused", "detail", line)
			return len(p), nil
		}
	}
	if strings.Contains(line, "[ERR]") || strings.Contains(line, "[WARN]") {
		l.a.log.Warn("memberlist", "detail", line)
	} else {
		l.a.log.Debug("memberlist", "detail", line)
	}
	return len(p), nil
}
