// Package cpufeat says whether a job's memory image, taken on one node,
// can run on another: what a node's CPU offers, in a form small enough to
// gossip, and the rule that compares two of them. It is pure: it reads no
// /proc (the daemon's wiring reads the flags once at start and hands them
// in) and does no I/O.
//
// A program picks its code when it starts: glibc's ifuncs, a BLAS or a
// JIT look at the CPU once and call AVX2 or AVX-512 code from then on. Its
// image, restored on a CPU without those instructions, dies with SIGILL
// at the first one; CRIU, run as roam runs it (its default --cpu-cap,
// fpu and ins), refuses the restore instead, after the job was frozen.
// So a node fits an image when it has every instruction-set feature of
// the CPU the image's program started on: the features of Ins, which are
// the bits CRIU's ins check compares (criu/arch/x86/cpu.c,
// x86_ins_capability_mask: "Destination might be more feature rich but
// not the reverse"), plus xsaves of its fpu check. A richer node fits; an
// image from a richer node fits a poorer one only when the two have the
// same features of Ins. Features outside Ins (vmx, pcid, smap, the
// kernel's own markers) change nothing a program can run, and CRIU does
// not compare them. Some of Ins are CRIU's caution more than a program's
// need (monitor: MWAIT runs only in the kernel, and a KVM guest hides it,
// so an image of a bare-metal node does not go to a guest of a newer
// CPU); the rule follows CRIU all the same, since a node CRIU would
// refuse is no place to send a frozen job.
//
// The flags are Linux's names of /proc/cpuinfo, which shows what the
// kernel lets programs use (a feature it disabled, as with clearcpuid or
// noxsave, is not there); osxsave, which CRIU's mask has, is one the
// kernel never shows: it sets it wherever xsave is, and xsave is compared.
//
// Unknown is allowed: a node that says nothing of its CPU (an older roam,
// or a node whose flags could not be read) fits every image, and an image
// of unknown features fits every node, as before roam compared them; CRIU
// still refuses a restore that cannot run there. Two known sets of other
// architectures never fit each other; on an architecture other than
// x86_64 the set has no flags, and only the architecture is compared.
package cpufeat

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Ins are the instruction-set features a Set records, by their
// /proc/cpuinfo names, in a fixed order: bit i of a Set is Ins[i]. The
// order is on the wire (node metadata, job records, checkpoints): append
// only. The groups are CRIU's CPUID words, in its order.
var Ins = []string{
	// CPUID 1 EDX
	"fpu", "tsc", "cx8", "sep", "cmov", "clflush", "mmx", "fxsr", "sse", "sse2",
	// CPUID 0x80000001 EDX
	"syscall", "mmxext", "rdtscp", "3dnowext", "3dnow",
	// Linux's own word 3 (CRIU's CPUID_LNX_1)
	"rep_good", "nopl",
	// CPUID 1 ECX (XMM3 is pni, MWAIT monitor in /proc/cpuinfo)
	"pni", "pclmulqdq", "monitor", "ssse3", "cx16", "sse4_1", "sse4_2", "movbe", "popcnt", "aes",
	"xsave", "avx", "f16c", "rdrand",
	// CPUID 0x80000001 ECX
	"abm", "sse4a", "misalignsse", "3dnowprefetch", "xop", "fma4", "tbm",
	// CPUID 7.0 EBX
	"fsgsbase", "bmi1", "hle", "avx2", "bmi2", "erms", "rtm", "mpx", "avx512f", "avx512dq",
	"rdseed", "adx", "clflushopt", "avx512pf", "avx512er", "avx512cd", "sha_ni", "avx512bw", "avx512vl",
	// CPUID 0xd.1 EAX (xsaves: CRIU's fpu check)
	"xsaveopt", "xsavec", "xgetbv1", "xsaves",
	// CPUID 7.0 ECX
	"avx512vbmi", "avx512_vbmi2", "gfni", "vaes", "vpclmulqdq", "avx512_vnni", "avx512_bitalg", "tme",
	"avx512_vpopcntdq", "rdpid",
	// CPUID 0x80000008 EBX
	"clzero",
	// CPUID 7.0 EDX
	"avx512_4vnniw", "avx512_4fmaps",
}

// words is how many 64-bit words a Set's bits take: room for 128
// features, of which Ins names the first.
const words = 2

// MaxText is the most bytes a Set's text takes: an architecture of at
// most 16 characters, a colon and 32 hex digits.
const MaxText = 16 + 1 + 2*8*words

// X86 is the architecture whose flags a Set records (uname -m).
const X86 = "x86_64"

// Set is what a node's CPU offers: its architecture and which features of
// Ins it has. The zero Set is unknown (it says nothing), which fits
// everything. Its text ("x86_64:" and 32 hex digits) is how it travels:
// in a node's metadata, a job's records and a checkpoint.
type Set struct {
	Arch string
	bits [words]uint64
}

// FromFlags is the Set of an arch's CPU whose /proc/cpuinfo flags are
// flags; flags outside Ins are not kept, nor any on another arch.
func FromFlags(arch string, flags []string) Set {
	s := Set{Arch: arch}
	if arch != X86 {
		return s
	}
	idx := make(map[string]int, len(Ins))
	for i, n := range Ins {
		idx[n] = i
	}
	for _, f := range flags {
		if i, ok := idx[f]; ok {
			s.bits[i/64] |= 1 << (i % 64)
		}
	}
	return s
}

// Known says whether the Set says anything.
func (s Set) Known() bool { return s.Arch != "" }

// has says whether the Set has feature bit i.
func (s Set) has(i int) bool { return s.bits[i/64]&(1<<(i%64)) != 0 }

// Has says whether the Set has the feature named f (of Ins).
func (s Set) Has(f string) bool {
	for i, n := range Ins {
		if n == f {
			return s.has(i)
		}
	}
	return false
}

// Flags are the names of the features of Ins the Set has, in Ins's
// order; a bit past Ins (from a newer roam) is named "bit N".
func (s Set) Flags() []string {
	var out []string
	for i := range words * 64 {
		if s.has(i) {
			out = append(out, name(i))
		}
	}
	return out
}

func name(i int) string {
	if i < len(Ins) {
		return Ins[i]
	}
	return fmt.Sprintf("bit %d", i)
}

// Missing are the features the image (the Set of the node its program
// started on) has that node lacks, by name, or its architecture when the
// two differ; nil when node fits the image, or when either is unknown.
func Missing(image, node Set) []string {
	if !image.Known() || !node.Known() {
		return nil
	}
	if image.Arch != node.Arch {
		return []string{"arch " + image.Arch}
	}
	var out []string
	for i := range words * 64 {
		if image.has(i) && !node.has(i) {
			out = append(out, name(i))
		}
	}
	return out
}

// Fits says whether a node whose CPU is node can run an image taken of a
// program that started on a CPU image (Missing is empty).
func Fits(image, node Set) bool { return len(Missing(image, node)) == 0 }

// Check is nil when node fits the image, or an error naming the node and
// what it lacks (at most maxNamed features, then how many more).
func Check(image, node Set, nodeName string) error {
	miss := Missing(image, node)
	if len(miss) == 0 {
		return nil
	}
	if miss[0] == "arch "+image.Arch {
		return fmt.Errorf("node %s is %s: the job's image is of %s", nodeName, node.Arch, image.Arch)
	}
	named := miss
	more := ""
	if len(named) > maxNamed {
		named, more = named[:maxNamed], fmt.Sprintf(" and %d more", len(miss)-maxNamed)
	}
	return fmt.Errorf("node %s's CPU lacks %s%s, which the CPU the job started on has (its program may use them)", nodeName, strings.Join(named, ", "), more)
}

// maxNamed bounds the features an error names: an AVX-512 node against
// one without names a dozen, which still reads on one line.
const maxNamed = 12

// Level is the x86-64 microarchitecture level (1 to 4) the Set reaches,
// as far as Ins shows it (lahf_lm, fma and lzcnt are not in Ins: their
// neighbours stand for them), 0 on another arch or unknown. It is the
// short summary `roam nodes` shows.
func (s Set) Level() int {
	if s.Arch != X86 {
		return 0
	}
	all := func(fs ...string) bool {
		for _, f := range fs {
			if !s.Has(f) {
				return false
			}
		}
		return true
	}
	switch {
	case !all("cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2"):
		return 0
	case !all("cx16", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"):
		return 1
	case !all("avx", "avx2", "bmi1", "bmi2", "f16c", "abm", "movbe", "xsave"):
		return 2
	case !all("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"):
		return 3
	}
	return 4
}

// Summary is a few words on the Set: its level and how many features of
// Ins it has ("x86-64-v4, 58 features"), "unknown" when it says nothing.
func (s Set) Summary() string {
	switch {
	case !s.Known():
		return "unknown"
	case s.Arch != X86:
		return s.Arch
	case s.Level() == 0:
		return fmt.Sprintf("%s, %d features", X86, len(s.Flags()))
	}
	return fmt.Sprintf("x86-64-v%d, %d features", s.Level(), len(s.Flags()))
}

var archPattern = regexp.MustCompile(`^[a-z0-9_]{1,16}$`)

// MarshalText is the Set's text: "" when unknown, else the arch, a colon
// and the bits in 32 hex digits.
func (s Set) MarshalText() ([]byte, error) {
	if !s.Known() {
		return []byte{}, nil
	}
	var raw [8 * words]byte
	for w := range words {
		for b := range 8 {
			raw[w*8+b] = byte(s.bits[words-1-w] >> (56 - 8*b))
		}
	}
	return []byte(s.Arch + ":" + hex.EncodeToString(raw[:])), nil
}

// String is the Set's text.
func (s Set) String() string {
	b, _ := s.MarshalText()
	return string(b)
}

// UnmarshalText reads a Set's text, which may come from a peer: at most
// MaxText bytes, an arch of lower-case letters, digits and underscores,
// exactly 32 lower-case hex digits, and no bits on an arch other than
// x86_64. "" is the unknown Set.
func (s *Set) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = Set{}
		return nil
	}
	if len(b) > MaxText {
		return fmt.Errorf("cpu features: %d bytes, more than %d", len(b), MaxText)
	}
	arch, bits, ok := strings.Cut(string(b), ":")
	if !ok || !archPattern.MatchString(arch) {
		return fmt.Errorf("cpu features: not ARCH:HEX (%q)", b)
	}
	raw, err := hex.DecodeString(bits)
	if err != nil || len(raw) != 8*words || strings.ToLower(bits) != bits {
		return fmt.Errorf("cpu features of %s: not %d lower-case hex digits", arch, 16*words)
	}
	out := Set{Arch: arch}
	for w := range words {
		for k := range 8 {
			out.bits[words-1-w] |= uint64(raw[w*8+k]) << (56 - 8*k)
		}
	}
	if arch != X86 && out.bits != [words]uint64{} {
		return fmt.Errorf("cpu features: bits on %s, which has none", arch)
	}
	*s = out
	return nil
}

// Parse is UnmarshalText of a string.
func Parse(text string) (Set, error) {
	var s Set
	err := s.UnmarshalText([]byte(text))
	return s, err
}
