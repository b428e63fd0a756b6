package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// MaxMessageSize bounds a load message on the wire; anything larger is
// rejected before it is parsed. A real message is about 120 bytes.
const MaxMessageSize = 512

// MsgVersion is the first byte of every load message, so that a later format
// can be told apart.
const MsgVersion byte = 1

// MaxLeast bounds a message's least CPU time (Entry.Least), in seconds:
// a thousand years of a CPU.
const MaxLeast = 3.2e10

// MaxMemMB bounds a message's memory for jobs and memory held
// (Entry.MemJobsMB, MemHeldMB), in MiB: 1 PiB, resources.MaxMemBytes.
const MaxMemMB = 1 << 30

// Errors returned by DecodeMessage; the agent counts them by kind.
var (
	ErrOversized = errors.New("load message too large")
	ErrMalformed = errors.New("malformed load message")
)

// wire is the JSON form of a load message.
type wire struct {
	Node      string  `json:"n"`
	Addr      string  `json:"a"`
	Capacity  float64 `json:"c"`
	Load      float64 `json:"l"`
	MemFreeMB float64 `json:"m"`
	// Least is absent when the node runs no job: a node of an older
	// roam, which refuses fields it does not know, still reads the loads
	// of idle nodes.
	Least float64 `json:"t,omitempty"`
	// Jobs and Held are absent from an older roam's message, which then
	// decodes with neither (memory not counted), and absent when 0: a
	// node that counts no memory and holds no request is still heard by
	// an older roam.
	Jobs float64 `json:"j,omitempty"`
	Held float64 `json:"h,omitempty"`
	// Waiting is absent when false, as the fields above.
	Waiting bool `json:"w,omitempty"`
}

// EncodeMessage turns our own entry into a load message.
func EncodeMessage(e Entry) []byte {
	b, _ := json.Marshal(wire{e.Node, e.Addr, e.Capacity, e.Load, e.MemFreeMB, e.Least, e.MemJobsMB, e.MemHeldMB, e.Waiting})
	return append([]byte{MsgVersion}, b...)
}

// DecodeMessage parses and checks a load message. It never panics, whatever
// the input; every rejection wraps ErrOversized or ErrMalformed.
func DecodeMessage(b []byte) (Entry, error) {
	if len(b) > MaxMessageSize {
		return Entry{}, fmt.Errorf("%w: %d bytes (max %d)", ErrOversized, len(b), MaxMessageSize)
	}
	if len(b) < 2 || b[0] != MsgVersion {
		return Entry{}, fmt.Errorf("%w: bad header", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(b[1:]))
	dec.DisallowUnknownFields()
	var w wire
	if err := dec.Decode(&w); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return Entry{}, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	switch {
	case w.Node == "" || len(w.Node) > 64:
		return Entry{}, fmt.Errorf("%w: node id", ErrMalformed)
	case len(w.Addr) > 128:
		return Entry{}, fmt.Errorf("%w: address", ErrMalformed)
	case !finite(w.Capacity) || w.Capacity <= 0 || w.Capacity > 4096:
		return Entry{}, fmt.Errorf("%w: capacity %v", ErrMalformed, w.Capacity)
	case !finite(w.Load) || w.Load < 0 || w.Load > 1e6:
		return Entry{}, fmt.Errorf("%w: load %v", ErrMalformed, w.Load)
	case !finite(w.MemFreeMB) || w.MemFreeMB < 0:
		return Entry{}, fmt.Errorf("%w: free memory %v", ErrMalformed, w.MemFreeMB)
	case !finite(w.Least) || w.Least < 0 || w.Least > MaxLeast:
		return Entry{}, fmt.Errorf("%w: least CPU time %v", ErrMalformed, w.Least)
	case !finite(w.Jobs) || w.Jobs < 0 || w.Jobs > MaxMemMB:
		return Entry{}, fmt.Errorf("%w: memory for jobs %v", ErrMalformed, w.Jobs)
	case !finite(w.Held) || w.Held < 0 || w.Held > MaxMemMB:
		return Entry{}, fmt.Errorf("%w: memory held %v", ErrMalformed, w.Held)
	}
	return Entry{Node: w.Node, Addr: w.Addr, Capacity: w.Capacity, Load: w.Load, MemFreeMB: w.MemFreeMB, Least: w.Least, MemJobsMB: w.Jobs, MemHeldMB: w.Held,
		Waiting: w.Waiting}, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
