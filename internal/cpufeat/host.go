package cpufeat

import (
	"regexp"
	"strings"
)

// Host is what a node says of itself that decides, or explains, where a
// job's image can run: its CPU's features, its CPU's model name, its
// kernel's release and its CRIU's version. Each comes from a peer's
// metadata too, so Bounded cuts it to what can be shown and gossiped.
type Host struct {
	CPU    Set
	Model  string // as /proc/cpuinfo's "model name" says
	Kernel string // uname -r
	CRIU   string // "4.1.0"; "" when CRIU does not answer
}

// Bounds of a Host's texts: together with a Set's MaxText they keep a
// node's metadata well within memberlist's 512 bytes (members.Meta).
const (
	MaxModel  = 64
	MaxKernel = 64
	MaxCRIU   = 19 // four numbers of four digits at most
)

var (
	kernelPattern = regexp.MustCompile(`^[A-Za-z0-9._+~-]{1,64}$`)
	criuPattern   = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,4}){0,3}$`)
)

// Bounded is h with every text that is too long or holds what a
// terminal or JSON would have to escape made safe: a model name keeps its
// printable ASCII, collapsed spaces and at most MaxModel bytes; a kernel
// release or CRIU version out of its pattern is dropped (""), not cut,
// as a part of one would mislead. The Set is already checked when read.
func (h Host) Bounded() Host {
	h.Model = cleanModel(h.Model)
	if !kernelPattern.MatchString(h.Kernel) {
		h.Kernel = ""
	}
	if !criuPattern.MatchString(h.CRIU) {
		h.CRIU = ""
	}
	return h
}

func cleanModel(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			r = ' '
		}
		b.WriteRune(r)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	if len(out) > MaxModel {
		out = strings.TrimSpace(out[:MaxModel])
	}
	return out
}

// Summary is the short line `roam nodes` shows of the CPU: its model, if
// known, and the Set's Summary.
func (h Host) Summary() string {
	if h.Model == "" {
		return h.CPU.Summary()
	}
	return h.Model + " (" + h.CPU.Summary() + ")"
}
