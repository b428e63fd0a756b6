package cpufeat

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The flags of two x86 generations, as their /proc/cpuinfo shows them
// in a KVM guest: a Haswell Xeon (AVX2, no AVX-512) and a Sapphire Rapids
// (AVX-512).
func recorded(t *testing.T) (older, newer Set) {
	t.Helper()
	read := func(f string) Set {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		return FromFlags(X86, strings.Fields(string(b)))
	}
	return read("haswell-e5-2666v3-kvm.flags"), read("sapphirerapids-kvm.flags")
}

// An image taken on the AVX-512 node cannot run on the Haswell: the rule
// names the AVX-512 features (and the others Haswell lacks); one taken on
// the Haswell runs on the newer node, and each on its own kind.
func TestRuleOfTwoGenerations(t *testing.T) {
	older, newer := recorded(t)
	if older.Level() != 3 || newer.Level() != 4 {
		t.Fatalf("levels %d and %d, want 3 and 4 (%s; %s)", older.Level(), newer.Level(), older.Summary(), newer.Summary())
	}
	miss := Missing(newer, older)
	for _, f := range []string{"avx512f", "avx512bw", "avx512vl", "sha_ni", "xsaves", "rdseed", "adx"} {
		if !slices.Contains(miss, f) {
			t.Errorf("newer on older: missing %v, want %s among them", miss, f)
		}
	}
	for _, f := range []string{"avx2", "sse2", "vmx", "fma"} {
		if slices.Contains(miss, f) {
			t.Errorf("newer on older: missing %v names %s, which is not missing or not compared", miss, f)
		}
	}
	if Fits(newer, older) || !Fits(older, newer) || !Fits(older, older) || !Fits(newer, newer) {
		t.Fatalf("fits: new→old %v, old→new %v, old→old %v, new→new %v", Fits(newer, older), Fits(older, newer), Fits(older, older), Fits(newer, newer))
	}
	err := Check(newer, older, "n2")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "node n2's CPU lacks") || !strings.Contains(err.Error(), "avx512f") {
		t.Fatalf("Check: %v", err)
	}
	if Check(older, newer, "n1") != nil {
		t.Fatalf("older on newer refused: %v", Check(older, newer, "n1"))
	}
}

// The same Haswell on bare metal shows monitor (MONITOR/MWAIT), which a
// KVM guest hides and CRIU's ins check compares: an image of it is not
// restored in the newer guest, though a program cannot use MWAIT outside
// the kernel. The rule is CRIU's, so that roam never sends a job where
// CRIU would refuse it after the freeze.
func TestBareMetalMonitorIsCompared(t *testing.T) {
	_, newer := recorded(t)
	b, err := os.ReadFile("testdata/haswell-e5-2680v3.flags")
	if err != nil {
		t.Fatal(err)
	}
	metal := FromFlags(X86, strings.Fields(string(b)))
	if miss := Missing(metal, newer); !slices.Equal(miss, []string{"monitor"}) {
		t.Fatalf("bare-metal Haswell on the Sapphire Rapids guest: missing %v, want [monitor]", miss)
	}
}

// Unknown is judged as before features were compared: allowed, both ways;
// another architecture never fits.
func TestRuleUnknownAndArch(t *testing.T) {
	_, newer := recorded(t)
	arm := FromFlags("aarch64", []string{"fp", "asimd", "avx2"})
	cases := []struct {
		name        string
		image, node Set
		fits        bool
	}{
		{"unknown node", newer, Set{}, true},
		{"unknown image", Set{}, newer, true},
		{"both unknown", Set{}, Set{}, true},
		{"x86 image on arm", newer, arm, false},
		{"arm image on x86", arm, newer, false},
		{"arm on arm", arm, arm, true},
	}
	for _, c := range cases {
		if got := Fits(c.image, c.node); got != c.fits {
			t.Errorf("%s: fits %v, want %v (%v)", c.name, got, c.fits, Check(c.image, c.node, "n"))
		}
	}
	if len(arm.Flags()) != 0 {
		t.Fatalf("arm keeps flags %v", arm.Flags())
	}
}

// A Set's text survives the trip, and text from a peer is bounded and
// checked: a bad one is an error, never a Set.
func TestSetText(t *testing.T) {
	older, newer := recorded(t)
	for _, s := range []Set{older, newer, {}, FromFlags("aarch64", nil)} {
		b, _ := s.MarshalText()
		if len(b) > MaxText {
			t.Fatalf("%s: %d bytes", b, len(b))
		}
		got, err := Parse(string(b))
		if err != nil || got != s {
			t.Fatalf("%q: %v %v", b, got, err)
		}
	}
	hex := strings.Repeat("0", 31) + "1"
	for _, bad := range []string{
		"x86_64", "x86_64:", ":" + hex, "X86:" + hex, "x86_64:" + hex + "0", "x86_64:" + strings.Repeat("F", 32),
		"x86_64:" + strings.Repeat("g", 32), "aarch64:" + hex, strings.Repeat("a", 17) + ":" + hex,
		"x86\"64:" + hex, "x86_64:" + strings.Repeat("0", 1000),
	} {
		if s, err := Parse(bad); err == nil {
			t.Errorf("%q: read as %v", bad, s)
		}
	}
}

// A peer's texts are bounded: a model name keeps printable ASCII within
// MaxModel, a kernel or CRIU version out of pattern is dropped.
func TestHostBounded(t *testing.T) {
	long := strings.Repeat("Xeon ", 40)
	h := Host{Model: "Intel\x1b[31m(R)\n \"Xeon\"\\ " + long, Kernel: "6.1.0-27-amd64", CRIU: "4.1.0"}.Bounded()
	if len(h.Model) > MaxModel || strings.ContainsAny(h.Model, "\x1b\n\"\\") || !strings.HasPrefix(h.Model, "Intel [31m(R) Xeon") {
		t.Fatalf("model %q", h.Model)
	}
	if h.Kernel != "6.1.0-27-amd64" || h.CRIU != "4.1.0" {
		t.Fatalf("kept %+v", h)
	}
	for _, k := range []string{"6.1 ; rm", strings.Repeat("6", 65), "6.1\x00", "é"} {
		if got := (Host{Kernel: k}).Bounded().Kernel; got != "" {
			t.Errorf("kernel %q kept as %q", k, got)
		}
	}
	for _, v := range []string{"4.1.0-rc1", "v4", "1.2.3.4.5", strings.Repeat("1", 17)} {
		if got := (Host{CRIU: v}).Bounded().CRIU; got != "" {
			t.Errorf("criu %q kept as %q", v, got)
		}
	}
}
