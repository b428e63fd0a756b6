package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/config"
	"roam/internal/agent/transport"
	"roam/internal/api"
	"roam/internal/load"
	"roam/internal/sched"
	"roam/internal/secret"
)

// Without a resolved address the agent is not built: it would advertise
// 0.0.0.0, where every other node would reach itself.
func TestAgentRefusesUnresolvedAdvertise(t *testing.T) {
	c := config.Default()
	c.NodeID = "n1"
	_, err := New(c, Parts{}, nil)
	if err == nil || !strings.Contains(err.Error(), "advertise_addr") {
		t.Fatalf("an agent with bind_addr 0.0.0.0 and no advertise_addr: %v", err)
	}
}

// freePort finds a TCP and UDP port free on loopback.
func freePort(t *testing.T) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			u.Close()
			return p
		}
	}
}

// startAgent runs an in-process agent on loopback.
func startAgent(t *testing.T, id, secretFile string, join ...string) (*Agent, string) {
	t.Helper()
	return startAgentIn(t, t.TempDir(), id, secretFile, join...)
}

// startAgentIn runs it with its state in dir.
func startAgentIn(t *testing.T, dir, id, secretFile string, join ...string) (*Agent, string) {
	t.Helper()
	return startAgentConfig(t, dir, id, secretFile, nil, join...)
}

// startAgentConfig runs it with its config changed by change (when not nil).
func startAgentConfig(t *testing.T, dir, id, secretFile string, change func(*Config), join ...string) (*Agent, string) {
	t.Helper()
	cfg := config.Default()
	cfg.NodeID = id
	cfg.BindAddr = "127.0.0.1"
	cfg.GossipPort = freePort(t)
	cfg.PeerPort = freePort(t)
	cfg.SecretFile = secretFile
	cfg.StateDir = dir
	cfg.Socket = filepath.Join(dir, "roamd.sock")
	cfg.Capacity = 1
	cfg.Join = join
	cfg.Load.Interval = 100 * time.Millisecond
	if change != nil {
		change(&cfg)
	}
	a, err := New(cfg, loopbackParts(t, cfg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.GossipPort))
}

// loopbackParts are real parts on loopback (the unix socket, mutual TLS,
// memberlist's UDP and TCP) with a fake node behind them: these tests run
// no job.
func loopbackParts(t *testing.T, cfg Config) Parts {
	t.Helper()
	sec, err := secret.ReadFile(cfg.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := sec.TLSConfig(cfg.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	api, err := transport.ListenAPI(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	node := &fakeNode{w: newWorld(1), name: cfg.NodeID, spool: filepath.Join(cfg.StateDir, "spool")}
	return Parts{
		API: api, Transport: transport.TLS{Config: tc, Bind: net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.PeerPort))},
		GossipKey: sec.GossipKey(), Checkpointer: node, Processes: node, Prober: node,
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Malformed, oversized and undecryptable input is dropped and counted; the
// agent keeps working.
func TestBadNetworkInputIsCountedNotFatal(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	a, aAddr := startAgent(t, "a", sf)
	b, _ := startAgent(t, "b", sf, aAddr)
	waitUntil(t, 5*time.Second, "b joins a", func() bool { return a.gossip.Memberlist().NumMembers() == 2 })
	waitUntil(t, 5*time.Second, "load flows", func() bool { return a.Stats().LoadReceived > 0 })

	var toA *memberlist.Node
	for _, n := range b.gossip.Memberlist().Members() {
		if n.Name == "a" {
			toA = n
		}
	}
	// Authenticated but malformed payloads, from a member.
	for _, msg := range [][]byte{
		{}, {0xff}, {load.MsgVersion, '{'},
		append([]byte{load.MsgVersion}, []byte(`{"n":"b","c":-1}`)...),
		append([]byte{load.MsgVersion}, []byte(`{"n":"b","c":1,"l":"NaN"}`)...),
	} {
		if err := b.gossip.Memberlist().SendBestEffort(toA, msg); err != nil {
			t.Fatal(err)
		}
	}
	big := append([]byte{load.MsgVersion}, make([]byte, load.MaxMessageSize+10)...)
	if err := b.gossip.Memberlist().SendBestEffort(toA, big); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "malformed and oversized counted", func() bool {
		s := a.Stats()
		return s.LoadMalformed >= 5 && s.LoadOversized >= 1
	})

	// Raw garbage and a truncated packet on the gossip port, from nowhere.
	conn, err := net.Dial("udp", aAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := a.Stats().GossipRejected
	for _, p := range [][]byte{[]byte("hello"), make([]byte, 1400), {1}} {
		_, _ = conn.Write(p)
	}
	waitUntil(t, 5*time.Second, "garbage packets counted as rejected", func() bool {
		return a.Stats().GossipRejected >= before+3
	})
	// Garbage on the TCP gossip port and on the TLS peer port.
	for _, addr := range []string{aAddr, net.JoinHostPort("127.0.0.1", strconv.Itoa(a.cfg.PeerPort))} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n\x00\x01garbage"))
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}
	waitUntil(t, 5*time.Second, "stream garbage and bad TLS counted", func() bool {
		s := a.Stats()
		return s.GossipRejected >= before+4 && s.PeerRejected >= 1
	})
	// Still alive and still taking good load messages.
	n := a.Stats().LoadReceived
	waitUntil(t, 5*time.Second, "load keeps flowing", func() bool { return a.Stats().LoadReceived > n })
	if a.gossip.Memberlist().NumMembers() != 2 {
		t.Fatal("membership broke")
	}
}

// Two agents with different secrets never see each other.
func TestDifferentSecretsDoNotJoin(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	_ = secret.New().WriteFile(s1)
	_ = secret.New().WriteFile(s2)
	a, aAddr := startAgent(t, "a", s1)
	b, _ := startAgent(t, "b", s2, aAddr)
	waitUntil(t, 5*time.Second, "a rejects b's join", func() bool { return a.Stats().GossipRejected > 0 })
	if a.gossip.Memberlist().NumMembers() != 1 || b.gossip.Memberlist().NumMembers() != 1 {
		t.Fatalf("members: a %d, b %d", a.gossip.Memberlist().NumMembers(), b.gossip.Memberlist().NumMembers())
	}
	for _, n := range a.Nodes() {
		if n.ID == "b" {
			t.Fatal("a lists b")
		}
	}
}

// A policy loaded with `roam policy load` is the cluster's: an agent that
// joins afterwards, whose config still names the default, takes it at its
// first push/pull. A peer state that does not decode or parse, or that is
// older, changes nothing.
func TestLoadedPolicyReachesALateJoiner(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	a, aAddr := startAgent(t, "a", sf)
	if _, err := a.sched.LoadPolicy(Caller{UID: 0}, api.PolicyRequest{Name: "static"}); err != nil {
		t.Fatal(err)
	}
	b, _ := startAgent(t, "b", sf, aAddr)
	waitUntil(t, 10*time.Second, "b runs a's policy", func() bool { return b.sched.Policy().Name == "static" })

	d := b.gossip
	ver := a.rounds.Policy().Version
	balance := sched.Builtin["balance"]
	for _, bad := range [][]byte{
		[]byte("{"), []byte(`{"text":"name: x"}`), // no version
		[]byte(`{"text":"name: [", "version":99}`),
		fmt.Appendf(nil, `{"text":%q,"version":%d}`, balance, ver-1),
		// An older version with a time far ahead is still older.
		fmt.Appendf(nil, `{"text":%q,"at":"9999-01-01T00:00:00Z","version":%d}`, balance, ver-1),
	} {
		d.MergeRemoteState(bad, false)
		if got := b.sched.Policy().Name; got != "static" {
			t.Fatalf("state %q changed the policy to %s", bad, got)
		}
	}
	d.MergeRemoteState(fmt.Appendf(nil, `{"text":%q,"version":%d}`, balance, ver+1), false)
	if got := b.sched.Policy().Name; got != "balance" {
		t.Fatalf("a newer policy was not taken: %s", got)
	}
}

// The loaded policy outlives a restart of the agent, alone (no peer to
// take it from), over its config's default.
func TestLoadedPolicyOutlivesARestart(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, _ := startAgentIn(t, dir, "a", sf)
	if got := a.sched.Policy().Name; got != sched.DefaultPolicy {
		t.Fatalf("a fresh agent runs %s, want the config's %s", got, sched.DefaultPolicy)
	}
	if _, err := a.sched.LoadPolicy(Caller{UID: 0}, api.PolicyRequest{Name: "threshold"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	again, _ := startAgentIn(t, dir, "a", sf)
	if got := again.sched.Policy().Name; got != "threshold" {
		t.Fatalf("after a restart the agent runs %s, want the loaded threshold", got)
	}
}
