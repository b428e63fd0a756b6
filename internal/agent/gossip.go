package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/api"
	"roam/internal/sched"
)

// member is what the agent knows of a member from memberlist.
type member struct {
	addr     string // gossip host:port
	peerAddr string // TLS host:port
	capacity float64
	alive    bool
	since    time.Time
	draining bool   // it says so in its metadata (roam node drain)
	version  string // its roam version, from its metadata
}

// meta is a member's memberlist metadata.
type meta struct {
	Capacity float64 `json:"c"`
	PeerPort int     `json:"p"`
	Draining bool    `json:"d,omitempty"`
	// Protocol and Version are api.Protocol and api.Version of the
	// member's agent (an older roam sends neither: protocol 1).
	Protocol int    `json:"pv,omitempty"`
	Version  string `json:"v,omitempty"`
}

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
	b, _ := json.Marshal(meta{Capacity: d.capacity, PeerPort: d.cfg.PeerPort, Draining: d.draining.Load(), Protocol: api.Protocol, Version: api.Version})
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
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	if a.sch.polVer == 0 {
		return nil
	}
	b, _ := json.Marshal(api.PolicyRequest{Text: a.sch.pol.Text(), At: a.sch.polAt, Version: a.sch.polVer})
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
	if err := json.Unmarshal(buf, &st); err != nil || st.Version == 0 || st.Version > maxPolicyVersion {
		a.log.Warn("gossip: a peer's policy state is unreadable", "err", err, "version", st.Version)
		return
	}
	a.sch.mu.Lock()
	newer := policyNewer(st.Version, st.Text, a.sch.polVer, a.sch.pol.Text())
	a.sch.mu.Unlock()
	if !newer {
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
	if err := checkProtocol(n.Name, n.Meta); err != nil {
		a.stats.gossipRejected.Add(1)
		a.log.Warn("gossip: member refused", "member", n.Name, "err", err)
		return err
	}
	return nil
}

// checkProtocol says why a member whose metadata is meta cannot be one:
// its agent speaks another protocol, both named with their versions.
func checkProtocol(name string, b []byte) error {
	var m meta
	if json.Unmarshal(b, &m) != nil {
		return fmt.Errorf("node %s: its metadata is unreadable (%d bytes): not a roam agent of protocol %d", name, len(b), api.Protocol)
	}
	p, v := m.Protocol, m.Version
	if p == 0 {
		p, v = 1, "older than protocol 2"
	}
	if p != api.Protocol {
		return fmt.Errorf("node %s speaks roam protocol %d (roam %s), this agent protocol %d (roam %s): run one version on every node (docs/deploy.md, upgrades)", name, p, quoteOdd(v), api.Protocol, api.Version)
	}
	return nil
}

// quoteOdd quotes a version a member sent when it is not plain text.
func quoteOdd(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s || len(s) > 64 {
		return q
	}
	return s
}

// events is memberlist's EventDelegate: thread-safe, must not block.
type events Agent

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Agent)(e).memberUp(n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Agent)(e).memberUp(n) }

func (e *events) NotifyLeave(n *memberlist.Node) {
	a := (*Agent)(e)
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.known[n.Name]; p != nil && n.Name != a.cfg.NodeID {
		p.alive = false
		p.since = time.Now()
	}
	a.dis.Forget(n.Name)
	a.log.Info("member down", "member", n.Name)
	// memberlist's callbacks must not block: the sweep runs beside them.
	select {
	case a.memberLeft <- struct{}{}:
	default:
	}
}

func (a *Agent) memberUp(n *memberlist.Node) {
	if n.Name == a.cfg.NodeID {
		return
	}
	var m meta
	// Metadata comes from the network: a member with unreadable metadata is
	// still a member, shown with capacity 0 until it says more.
	if err := json.Unmarshal(n.Meta, &m); err != nil || m.Capacity < 0 || m.PeerPort < 0 || m.PeerPort > 65535 {
		m = meta{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.known[n.Name]
	if p == nil {
		p = &member{}
		a.known[n.Name] = p
		a.log.Info("member up", "member", n.Name, "addr", n.Address())
	}
	if !p.alive {
		p.since = time.Now()
	}
	p.alive = true
	p.addr = n.Address()
	p.peerAddr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(m.PeerPort))
	p.capacity = m.Capacity
	if p.draining != m.Draining {
		a.log.Info("member draining", "member", n.Name, "draining", m.Draining)
	}
	p.draining = m.Draining
	if len(m.Version) <= 64 {
		p.version = m.Version
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
