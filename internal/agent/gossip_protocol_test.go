package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/members"
	"roam/internal/api"
)

// A member whose agent speaks another protocol is refused, with both
// protocols and versions named; one of this protocol is taken, and its
// version shows in roam nodes.
func TestMembersOfAnotherProtocolAreRefused(t *testing.T) {
	m := func(pv int, v string) []byte {
		b, _ := json.Marshal(members.Meta{Capacity: 1, PeerPort: 7947, Protocol: pv, Version: v})
		return b
	}
	for _, tc := range []struct {
		name string
		meta []byte
		want string
	}{
		{"this protocol", m(api.Protocol, "0.3.0"), ""},
		{"a newer protocol", m(api.Protocol+1, "0.9.0"), "node x speaks roam protocol 3 (roam 0.9.0), this agent protocol 2 (roam "},
		{"an older roam", []byte(`{"c":1,"p":7947}`), "node x speaks roam protocol 1 (roam older than protocol 2), this agent protocol 2"},
		{"not a roam agent", []byte("junk"), "node x: its metadata is unreadable (4 bytes)"},
	} {
		err := members.CheckProtocol("x", tc.meta)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 33, faults{}, "static")
		a := c.nodes[0].a
		c.waitFor("n2 in n1's roam nodes with its version", time.Minute, func() bool {
			for _, n := range a.Nodes() {
				if n.ID == "n2" && n.Alive && n.Version == api.Version {
					return true
				}
			}
			return false
		})
		if err := a.gossip.NotifyAlive(&memberlist.Node{Name: "n9", Meta: m(api.Protocol+1, "9")}); err == nil {
			t.Fatal("a member of protocol 3 was taken")
		}
		if err := a.gossip.NotifyAlive(&memberlist.Node{Name: "n2", Meta: m(api.Protocol, api.Version)}); err != nil {
			t.Fatalf("a member of this protocol: %v", err)
		}
	})
}
