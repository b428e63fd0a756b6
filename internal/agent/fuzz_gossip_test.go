package agent

// Fuzz targets of the agent (their harness is fuzz_test.go):
// What memberlist hands the agent: metadata, the push/pull state, load messages.

import (
	"bytes"
	"encoding/json"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/members"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/load"
	"roam/internal/sched"
)

// ---- memberlist ----

// FuzzGossipMeta: a member's metadata (NotifyJoin) makes it a live peer
// with a capacity that is a finite number, not negative, and a peer
// address of its IP and a port; metadata a peer makes (NodeMeta) comes
// through as it was.
func FuzzGossipMeta(f *testing.F) {
	src, _ := fzBare(f)
	f.Add(src.delegateMeta(), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":0.25,"p":65535}`), "n3.example", []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte(`{"c":-1,"p":7947}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":1,"p":65536}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":1e308,"p":0}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":"4"}`), fzSelf, []byte{10, 0, 0, 3})
	f.Add([]byte{}, "n3", []byte{})
	var pool fzBarePool
	f.Fuzz(func(t *testing.T, md []byte, name string, ip []byte) {
		a := pool.get(t)
		a.gossip.NotifyJoin(&memberlist.Node{Name: name, Addr: net.IP(ip), Port: 7946, Meta: md})
		p, ok := a.members.Get(name)
		if name == fzSelf {
			if ok {
				t.Fatal("the node took a member of its own name")
			}
			return
		}
		if !ok || !p.Alive {
			t.Fatalf("member %q not up: %+v", name, p)
		}
		if math.IsNaN(p.Capacity) || math.IsInf(p.Capacity, 0) || p.Capacity < 0 {
			t.Fatalf("capacity %v from %q", p.Capacity, md)
		}
		host, port, err := net.SplitHostPort(p.PeerAddr)
		if err != nil || host != net.IP(ip).String() {
			t.Fatalf("peer address %q for IP %v: %v", p.PeerAddr, net.IP(ip), err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			t.Fatalf("peer port %q", port)
		}
		var m members.Meta
		if json.Unmarshal(md, &m) == nil && m.Capacity >= 0 && m.PeerPort >= 0 && m.PeerPort <= 65535 &&
			(p.Capacity != m.Capacity || port != strconv.Itoa(m.PeerPort)) {
			t.Fatalf("metadata %q taken as capacity %v, address %s", md, p.Capacity, p.PeerAddr)
		}
	})
}

// delegateMeta is what the agent gossips of itself.
func (a *Agent) delegateMeta() []byte { return a.gossip.NodeMeta(512) }

// FuzzGossipState: a peer's push/pull state (MergeRemoteState) replaces
// this node's policy only with one of a later version (or, of the same
// version, a greater text) that parses, and never makes the node's
// version go back; the state a node then sends (LocalState) gives a node
// with an older version the same policy and version, and changes nothing
// on a node that has it.
func FuzzGossipState(f *testing.F) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"balance", "static", "threshold"} {
		f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin[name], At: at.Add(time.Hour), Version: 6}))
	}
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"], At: at.Add(-time.Hour), Version: 4}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["static"], At: at, Version: 5}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"]}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nplacement: nowhere\n", At: at.Add(time.Hour), Version: 7}))
	f.Add([]byte(`{"text":"name: p\n","version":18446744073709551615}`))
	f.Add([]byte(`{"text":"name: zzz\n","at":"9999-12-31T23:59:59-23:59","version":5}`))
	f.Add([]byte(`{"version":9}`))
	f.Add([]byte("null"))
	const ver = 5
	mosix, err := sched.ParsePolicy([]byte(sched.Builtin["mosix"]))
	if err != nil {
		f.Fatal(err)
	}
	var pa, pb fzBarePool
	f.Fuzz(func(t *testing.T, buf []byte) {
		a := pa.get(t)
		a.sched.SetPolicy(mosix, ver, at)
		a.gossip.MergeRemoteState(buf, false)
		cur := a.rounds.Policy()
		pol, polVer := cur.Scheduler, cur.Version
		if polVer < ver {
			t.Fatalf("policy version went back to %d", polVer)
		}
		if pol.Text() != mosix.Text() || polVer != ver {
			var st api.PolicyRequest
			if json.Unmarshal(buf, &st) != nil || !rounds.Newer(st.Version, st.Text, ver, mosix.Text()) || polVer != st.Version || st.Version > rounds.MaxPolicyVersion {
				t.Fatalf("policy replaced by %q version %d from %q", pol.Policy.Name, polVer, buf)
			}
			if _, err := sched.ParsePolicy([]byte(st.Text)); err != nil {
				t.Fatalf("a policy that does not parse was taken: %v", err)
			}
		}
		state := a.gossip.LocalState(false)
		a.gossip.MergeRemoteState(state, false)
		after := a.rounds.Policy()
		again, againVer := after.Scheduler, after.Version
		if again != pol || againVer != polVer {
			t.Fatalf("the node's own state %q changed its policy", state)
		}
		b := pb.get(t)
		b.sched.SetPolicy(mosix, ver-1, at)
		b.gossip.MergeRemoteState(state, false)
		bp := b.rounds.Policy()
		got, gotVer := bp.Text(), bp.Version
		if got != pol.Text() || gotVer != polVer {
			t.Fatalf("a peer took %q version %d from state %q, want version %d", got, gotVer, state, polVer)
		}
	})
}

// FuzzLoadMessage: a load message is counted once, as received,
// malformed or oversized; a received one is kept or discarded, and the
// load vector has the sender exactly when it was kept.
func FuzzLoadMessage(f *testing.F) {
	f.Add(load.EncodeMessage(load.Entry{Node: "n3", Addr: "10.0.0.3:7947", Capacity: 4, Load: 0.5, MemFreeMB: 1024}))
	f.Add(load.EncodeMessage(load.Entry{Node: fzSelf, Addr: "10.0.0.2:7947", Capacity: 4, Load: 0.5, MemFreeMB: 1024}))
	f.Add([]byte("\x01{\"n\":\"n3\",\"c\":0,\"l\":0,\"m\":0}"))
	f.Add(bytes.Repeat([]byte{1}, load.MaxMessageSize+1))
	f.Add([]byte{})
	var pool fzBarePool
	f.Fuzz(func(t *testing.T, b []byte) {
		a := pool.get(t)
		a.gossip.NotifyMsg(b)
		s := a.Stats()
		if s.LoadReceived+s.LoadMalformed+s.LoadOversized != 1 || s.LoadKept+s.LoadDiscarded != s.LoadReceived {
			t.Fatalf("counted %+v", s)
		}
		e, err := load.DecodeMessage(b)
		_, held := a.members.Heard(e.Node)
		n := a.members.VectorLen()
		if (err == nil && held) != (s.LoadKept == 1) || n != int(s.LoadKept) {
			t.Fatalf("counted %+v, vector holds %d entries (sender's: %v)", s, n, held)
		}
	})
}
