package members

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/errkind"
	"roam/internal/fence"
	"roam/internal/sched"
)

// maxVersion bounds the version text kept of a member.
const maxVersion = 64

// Meta is a member's memberlist metadata.
type Meta struct {
	Capacity float64 `json:"c"`
	PeerPort int     `json:"p"`
	Draining bool    `json:"d,omitempty"`
	// Protocol and Version are api.Protocol and api.Version of the
	// member's agent (an older roam sends neither: protocol 1).
	Protocol int    `json:"pv,omitempty"`
	Version  string `json:"v,omitempty"`
	// UserNS: users' jobs run in user namespaces of their own there (an
	// older roam does not say).
	UserNS bool `json:"u,omitempty"`
	// LazyUserNS: its CRIU restores a job lazily inside the job's own
	// user namespace (ckpt.LazyInUserNS); an older roam does not say, and
	// is sent such jobs eagerly.
	LazyUserNS bool `json:"lu,omitempty"`
	// CPU (cpufeat.Set's text), Model, Kernel and CRIU are its
	// cpufeat.Host: what its CPU offers, its CPU's model, its kernel's
	// release and its CRIU's version. An older roam sends none; each is
	// checked and bounded on its own (Host), and one out of bounds is
	// dropped, not the member: its CPU then fits every job, as an older
	// node's does.
	CPU    string `json:"cpu,omitempty"`
	Model  string `json:"cm,omitempty"`
	Kernel string `json:"k,omitempty"`
	CRIU   string `json:"cv,omitempty"`
	// FenceKillMS is its fence.kill in milliseconds: a home waits for the
	// longer of its own and this before it restarts the member's jobs
	// (fence.Config.RestartAt). An older roam does not say.
	FenceKillMS int64 `json:"fk,omitempty"`
	// Slurm is its name in Slurm (slurm.node, else its node id): how an
	// allocation's node list names it. One that is not a node name is
	// dropped (the member is then in no allocation).
	Slurm string `json:"sn,omitempty"`
}

// FenceKill is the member's fence.kill as its metadata says it, or 0 when
// it says none or one out of fence's bounds.
func (m Meta) FenceKill() time.Duration {
	d := time.Duration(m.FenceKillMS) * time.Millisecond
	if m.FenceKillMS <= 0 || m.FenceKillMS > int64(fence.MaxTotal/time.Millisecond) {
		return 0
	}
	return d
}

// MetaOf is the metadata a node sends of host h, its other fields set by
// the caller.
func MetaOf(h cpufeat.Host) Meta {
	h = h.Bounded()
	return Meta{CPU: h.CPU.String(), Model: h.Model, Kernel: h.Kernel, CRIU: h.CRIU}
}

// Host is the member's cpufeat.Host as its metadata says it, bounded: a
// CPU text that does not parse is unknown.
func (m Meta) Host() cpufeat.Host {
	set, err := cpufeat.Parse(m.CPU)
	if err != nil {
		set = cpufeat.Set{}
	}
	return cpufeat.Host{CPU: set, Model: m.Model, Kernel: m.Kernel, CRIU: m.CRIU}.Bounded()
}

// ParseMeta reads a member's metadata, which comes from the network: a
// member whose metadata is unreadable or out of range is still a member,
// shown with capacity 0 until it says more.
func ParseMeta(b []byte) Meta {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil || m.Capacity < 0 || m.PeerPort < 0 || m.PeerPort > 65535 {
		return Meta{}
	}
	return m
}

// CheckProtocol says why a member whose metadata is b cannot be one: its
// agent speaks another protocol, both named with their versions.
func CheckProtocol(name string, b []byte) error {
	var m Meta
	if json.Unmarshal(b, &m) != nil {
		return fmt.Errorf("node %s: its metadata is unreadable (%d bytes): not a roam agent of protocol %d", name, len(b), api.Protocol)
	}
	p, v := m.Protocol, m.Version
	if p == 0 {
		p, v = 1, "older than protocol 2"
	}
	if p != api.Protocol {
		return fmt.Errorf("node %s speaks roam protocol %d (roam %s), this agent protocol %d (roam %s): run one version on every node (docs/deploy.md, upgrades)", name, p, errkind.QuoteOdd(v, maxVersion), api.Protocol, api.Version)
	}
	return nil
}

// cpuSummary is what `roam nodes` shows of a CPU's features: nothing for
// a node that does not say.
func cpuSummary(s cpufeat.Set) string {
	if !s.Known() {
		return ""
	}
	return s.Summary()
}

// Nodes is what `roam nodes` shows: every member heard of, with load and
// memory from the load vector (this node's own as probed; selfDraining
// is its own drain state, which its metadata may not show yet).
func (t *Table) Nodes(now time.Time, selfDraining bool) []api.NodeInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.NodeInfo, 0, len(t.known))
	for id, p := range t.known {
		ni := api.NodeInfo{ID: id, Addr: p.PeerAddr, Alive: p.Alive, Capacity: p.Capacity, Draining: p.Draining, Version: p.Version, UserNS: p.UserNS,
			Kernel: p.Host.Kernel, CRIU: p.Host.CRIU, CPUModel: p.Host.Model, CPU: cpuSummary(p.Host.CPU), CPUFeatures: p.Host.CPU.String(), Slurm: p.Slurm}
		if id == t.self {
			l, m, age := t.selfLoad, t.selfMem, int64(0)
			ni.Self, ni.Load, ni.MemFreeMB, ni.InfoAgeMS = true, &l, &m, &age
			ni.Draining = selfDraining
			ni.MemJobsMB, ni.MemHeldMB = t.jobMem, t.selfHeld
		} else if e, ok := t.dis.Vector.Get(id); ok {
			l, m, age := e.Load, e.MemFreeMB, now.Sub(e.Received).Milliseconds()
			ni.Load, ni.MemFreeMB, ni.InfoAgeMS = &l, &m, &age
			ni.MemJobsMB, ni.MemHeldMB = e.MemJobsMB, e.MemHeldMB
		}
		out = append(out, ni)
	}
	sort.Slice(out, func(i, j int) bool { return sched.IDLess(out[i].ID, out[j].ID) })
	return out
}
