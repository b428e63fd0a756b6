package members

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/cpufeat"
	"roam/internal/resources"
)

// The largest metadata a node can send, every field at its bound (every
// CPU feature, the longest model, kernel, CRIU and version), fits
// memberlist's limit: NodeMeta sends none at all past it.
func TestLargestMetaFitsMemberlist(t *testing.T) {
	all := cpufeat.FromFlags(cpufeat.X86, cpufeat.Ins)
	m := MetaOf(cpufeat.Host{CPU: all, Model: strings.Repeat("M", 300), Kernel: strings.Repeat("k", cpufeat.MaxKernel), CRIU: "1234.1234.1234.1234"})
	m.Capacity, m.PeerPort, m.Draining, m.Protocol, m.Version = -math.MaxFloat64, 65535, true, math.MinInt64, strings.Repeat("v", maxVersion)
	m.UserNS, m.LazyUserNS, m.FenceKillMS, m.Slurm = true, true, math.MinInt64, strings.Repeat("s", 63)
	b, err := json.Marshal(m)
	if err != nil || len(b) > memberlist.MetaMaxSize {
		t.Fatalf("%d bytes (limit %d): %s %v", len(b), memberlist.MetaMaxSize, b, err)
	}
	var back Meta
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Host(); got.CPU != all || got.Kernel == "" || got.CRIU == "" || len(got.Model) != cpufeat.MaxModel {
		t.Fatalf("read back as %+v", got)
	}
	t.Logf("largest metadata: %d of %d bytes", len(b), memberlist.MetaMaxSize)
}

// A peer's CPU, model, kernel and CRIU are bounded one by one: a field
// out of bounds is dropped (a CPU that does not parse is unknown, and
// fits every job, as an older node's), the member and the rest stay.
func TestMetaHostFromAPeerIsBounded(t *testing.T) {
	tb := newTable(t, "least-loaded")
	up(tb, "n2", "198.18.0.2", `{"c":4,"p":7947,"cpu":"x86_64:zz","cm":"\u001b[2J evil\nmodel","k":"6.1; rm -rf /","cv":"4.1.0"}`)
	p, _ := tb.Get("n2")
	if !p.Alive || p.Capacity != 4 || p.Host.CPU.Known() || p.Host.Kernel != "" || p.Host.CRIU != "4.1.0" || p.Host.Model != "[2J evil model" {
		t.Fatalf("n2 is %+v", p)
	}
	all := cpufeat.FromFlags(cpufeat.X86, cpufeat.Ins)
	up(tb, "n3", "198.18.0.3", `{"c":4,"p":7947,"cpu":"`+all.String()+`","k":"6.1.0-27-amd64","cm":"Xeon"}`)
	ns := tb.Nodes(t0, false)
	var n3 bool
	for _, n := range ns {
		if n.ID == "n3" {
			n3 = true
			if n.Kernel != "6.1.0-27-amd64" || n.CPUFeatures != all.String() || n.CPU != all.Summary() || n.CPUModel != "Xeon" {
				t.Fatalf("roam nodes shows n3 as %+v", n)
			}
		}
	}
	if !n3 {
		t.Fatal("n3 not shown")
	}
}

// A restart's placement takes only nodes whose CPU runs the image, with
// --on too, and says what the node lacks; a first start goes anywhere.
func TestPlaceChoosesOnlyCPUsThatRunTheImage(t *testing.T) {
	tb := newTable(t, "least-loaded")
	newer := cpufeat.FromFlags(cpufeat.X86, []string{"sse2", "avx2", "avx512f"})
	older := cpufeat.FromFlags(cpufeat.X86, []string{"sse2", "avx2"})
	up(tb, "n2", "198.18.0.2", `{"c":8,"p":7947,"cpu":"`+older.String()+`"}`)
	up(tb, "n3", "198.18.0.3", `{"c":1,"p":7947,"cpu":"`+newer.String()+`"}`)
	for range 5 {
		out, _, err := tb.Place("", 1, false, resources.Request{}, 0, newer, nil)
		if err != nil || out[0] == "n2" {
			t.Fatalf("an AVX-512 image placed on %v (%v)", out, err)
		}
	}
	if _, _, err := tb.Place("n2", 1, false, resources.Request{}, 0, newer, nil); err == nil || !strings.Contains(err.Error(), "avx512f") {
		t.Fatalf("--on n2 for an AVX-512 image: %v", err)
	}
	if out, _, err := tb.Place("", 1, false, resources.Request{}, 0, cpufeat.Set{}, nil); err != nil || out[0] != "n2" {
		t.Fatalf("a first start goes to the least loaded, n2: %v %v", out, err)
	}
}

// A member's fence.kill is kept only within fence's bounds: a home
// waits for it (fence.Config.RestartAt), so one past them would hold a
// lost node's jobs back for as long as a member liked.
func TestMetaFenceKillIsBounded(t *testing.T) {
	tb := newTable(t, "least-loaded")
	for _, tc := range []struct {
		fk   string
		want time.Duration
	}{
		{`80000`, 80 * time.Second},
		{`600000`, 10 * time.Minute},
		{`600001`, 0},
		{`-5`, 0},
		{`"x"`, 0}, // not a number: the metadata is unreadable, the member stays
	} {
		up(tb, "n2", "198.18.0.2", `{"c":4,"p":7947,"fk":`+tc.fk+`}`)
		if got := tb.FenceKill("n2"); got != tc.want {
			t.Errorf("fk %s: %v, want %v", tc.fk, got, tc.want)
		}
	}
}
