package load

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the load message, the one thing the load package takes
// from the network (memberlist's user messages, already decrypted but
// from any member). scripts/fuzz.sh runs them.

// fuzzEntries are realistic entries: what nodes send.
var fuzzEntries = []Entry{
	{Node: "n1", Addr: "10.0.0.1:7947", Capacity: 4, Load: 0.5, MemFreeMB: 2048},
	{Node: "node-2.example.org", Addr: "[fd00::2]:7947", Capacity: 0.25, Load: 0, MemFreeMB: 0},
	{Node: strings.Repeat("a", 63), Addr: "192.168.100.200:65535", Capacity: 4096, Load: 1e6, MemFreeMB: 1.5e6},
	{Node: "x", Addr: "", Capacity: 0.01, Load: 3.0000000000000004, MemFreeMB: 12.345678901234567},
	{Node: "n7", Addr: "10.0.0.7:7947", Capacity: 0.2, Load: 10, MemFreeMB: 900, Least: 2.71},
	{Node: "n8", Addr: "10.0.0.8:7947", Capacity: 1, Load: 1, MemFreeMB: 900, Least: MaxLeast},
	{Node: "n9", Addr: "10.0.0.9:7947", Capacity: 0.4, Load: 2.5, MemFreeMB: 300, MemJobsMB: 768, MemHeldMB: 640},
	{Node: "n10", Addr: "10.0.0.10:7947", Capacity: 8, MemFreeMB: 30000, MemJobsMB: MaxMemMB, MemHeldMB: MaxMemMB},
}

// FuzzDecodeMessage: whatever the bytes, DecodeMessage returns an error of
// its two kinds or an entry inside the documented bounds, which encodes
// back to the same entry; and the vector that takes it never holds more
// than its size, two entries of one node, or the node itself.
func FuzzDecodeMessage(f *testing.F) {
	for _, e := range fuzzEntries {
		f.Add(EncodeMessage(e))
	}
	for _, s := range []string{
		"",
		"\x01",
		"\x02{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0}{\"n\":\"b\"}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0,\"x\":1}",
		"\x01{\"n\":\"a\",\"c\":0,\"l\":0,\"m\":0}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":-1,\"m\":0}",
		"\x01{\"n\":\"a\",\"c\":1e400,\"l\":0,\"m\":0}",
		"\x01{\"n\":\"\",\"c\":1,\"l\":0,\"m\":0}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":-0,\"m\":0} ",
		"\x01{\"N\":\"a\",\"C\":1,\"L\":0,\"M\":0}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0,\"t\":-1}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0,\"t\":3.2e11}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0,\"j\":-1}",
		"\x01{\"n\":\"a\",\"c\":1,\"l\":0,\"m\":0,\"j\":768,\"h\":2e9}",
		"\x01[]",
		"\x01null",
		"\x01" + strings.Repeat(" ", MaxMessageSize),
	} {
		f.Add([]byte(s))
	}
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, ErrOversized) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error of no documented kind: %v", err)
			}
			if errors.Is(err, ErrOversized) != (len(b) > MaxMessageSize) {
				t.Fatalf("%d bytes: oversized is %v", len(b), errors.Is(err, ErrOversized))
			}
			return
		}
		switch {
		case len(b) > MaxMessageSize || b[0] != MsgVersion:
			t.Fatalf("accepted %d bytes starting %#x", len(b), b[0])
		case e.Node == "" || len(e.Node) > 64:
			t.Fatalf("node id %q accepted", e.Node)
		case len(e.Addr) > 128:
			t.Fatalf("address of %d bytes accepted", len(e.Addr))
		case !fuzzFinite(e.Capacity) || e.Capacity <= 0 || e.Capacity > 4096:
			t.Fatalf("capacity %v accepted", e.Capacity)
		case !fuzzFinite(e.Load) || e.Load < 0 || e.Load > 1e6:
			t.Fatalf("load %v accepted", e.Load)
		case !fuzzFinite(e.MemFreeMB) || e.MemFreeMB < 0:
			t.Fatalf("free memory %v accepted", e.MemFreeMB)
		case !fuzzFinite(e.Least) || e.Least < 0 || e.Least > MaxLeast:
			t.Fatalf("least CPU time %v accepted", e.Least)
		case !fuzzFinite(e.MemJobsMB) || e.MemJobsMB < 0 || e.MemJobsMB > MaxMemMB || !fuzzFinite(e.MemHeldMB) || e.MemHeldMB < 0 || e.MemHeldMB > MaxMemMB:
			t.Fatalf("memory for jobs %v, held %v accepted", e.MemJobsMB, e.MemHeldMB)
		case !e.Received.IsZero():
			t.Fatalf("received time %v set by the decoder", e.Received)
		}
		// What was accepted encodes to a message that decodes to it. (An
		// entry whose strings JSON escapes to more than the size limit
		// is one no node sends: node ids and addresses are plain ASCII.)
		if enc := EncodeMessage(e); len(enc) <= MaxMessageSize {
			again, err := DecodeMessage(enc)
			if err != nil || again != e {
				t.Fatalf("re-encoded entry %+v came back as %+v, %v", e, again, err)
			}
		}

		d := NewDisseminator("self", 2, PolicyBeneficial, time.Second)
		d.Receive(now, Entry{Node: "old", Capacity: 1, Load: 0.1}, 1)
		kept := d.Receive(now, e, 1)
		if e.Node == "self" && kept {
			t.Fatal("the node's own entry was kept in its vector")
		}
		ents := d.Vector.Entries()
		if len(ents) > 2 {
			t.Fatalf("vector of size 2 holds %d entries", len(ents))
		}
		seen := map[string]bool{}
		for _, x := range ents {
			if seen[x.Node] || x.Node == "self" {
				t.Fatalf("vector %+v holds node %q twice or itself", ents, x.Node)
			}
			seen[x.Node] = true
		}
		if kept {
			got, ok := d.Vector.Get(e.Node)
			want := e
			want.Received = now
			if !ok || got != want {
				t.Fatalf("kept entry is %+v (%v), want %+v", got, ok, want)
			}
		}
	})
}

// nodeID is the agent's node id pattern (config.Config.Validate).
var nodeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)

// FuzzMessageRoundTrip: every entry a node can send (a node id, an
// address, values in the bounds) encodes within MaxMessageSize and
// decodes to itself.
func FuzzMessageRoundTrip(f *testing.F) {
	for _, e := range fuzzEntries {
		f.Add(e.Node, e.Addr, e.Capacity, e.Load, e.MemFreeMB, e.Least, e.MemJobsMB, e.MemHeldMB)
	}
	f.Add("n", "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535", 4095.999999999999, 999999.9999999999, 1.7976931348623157e308, float64(MaxLeast),
		float64(MaxMemMB)-1e-7, float64(MaxMemMB)-1e-7)
	f.Fuzz(func(t *testing.T, node, addr string, capacity, load, mem, least, jobs, held float64) {
		if !nodeID.MatchString(node) || len(addr) > 64 || !fuzzPrintableASCII(addr) ||
			!fuzzFinite(capacity) || capacity <= 0 || capacity > 4096 ||
			!fuzzFinite(load) || load < 0 || load > 1e6 || !fuzzFinite(mem) || mem < 0 ||
			!fuzzFinite(least) || least < 0 || least > MaxLeast ||
			!fuzzFinite(jobs) || jobs < 0 || jobs > MaxMemMB || !fuzzFinite(held) || held < 0 || held > MaxMemMB {
			return
		}
		e := Entry{Node: node, Addr: addr, Capacity: capacity, Load: load, MemFreeMB: mem, Least: least, MemJobsMB: jobs, MemHeldMB: held}
		enc := EncodeMessage(e)
		if len(enc) > MaxMessageSize {
			t.Fatalf("entry %+v encodes to %d bytes, over %d", e, len(enc), MaxMessageSize)
		}
		got, err := DecodeMessage(enc)
		if err != nil || got != e {
			t.Fatalf("entry %+v came back as %+v, %v", e, got, err)
		}
	})
}

func fuzzFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func fuzzPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
