package connlimit

// Caps are a listener's caps on the connections it holds at once.
type Caps struct {
	// Total is the most connections open at once, PerKey the most of
	// one key; a connection of key "" is held to Total only.
	Total, PerKey int
	// MakeRoom admits one more of a key at its cap when one of the key's
	// has made no request yet (AdmittedOverOne): for a listener whose
	// server proves its connections (Prove).
	MakeRoom bool
}

// Counter counts a listener's open connections by key and decides, for
// one more, whether it is within the caps. It is the listener's whole
// policy, and does no I/O; the Listener holds a lock around it.
type Counter struct {
	caps     Caps
	shared   int // the connections held to Total
	own      int // those held to caps of their own
	per      map[string]int
	unproven map[string]int // of per, those that have made no request yet
}

// NewCounter counts against caps.
func NewCounter(caps Caps) *Counter {
	return &Counter{caps: caps, per: map[string]int{}, unproven: map[string]int{}}
}

// Place is an admitted connection's place in the counts.
type Place struct {
	key    string
	own    bool
	proven bool
}

// Verdict is Admit's decision on one more connection.
type Verdict int

const (
	// Admitted: the connection is within the caps.
	Admitted Verdict = iota
	// AdmittedOverOne: its key is at its cap, and one of the key's
	// connections has made no request yet (with Caps.MakeRoom): the new
	// one is admitted, one
	// over, and the caller closes the key's oldest unproven one, which
	// brings the key back to its cap. A key's real client (a member's
	// agent, whose connections make their requests within milliseconds)
	// so gets in past connections of the same key that never will (a
	// job's, on that member's address).
	AdmittedOverOne
	// RefusedByKey: the key is at its cap, every one of its connections
	// proven.
	RefusedByKey
	// RefusedByTotal: the total is reached.
	RefusedByTotal
)

// Admit decides on one more connection of key, and counts it unless
// refused. own > 0 holds the key to a cap of its own instead, outside
// Total and PerKey: root on the roam socket, whom the users together
// must not lock out; a member's address on the peer port, which
// strangers' connections must not crowd out.
func (c *Counter) Admit(key string, own int) (*Place, Verdict) {
	v := Admitted
	limit := c.caps.PerKey
	if own > 0 {
		limit = own
	} else if c.shared >= c.caps.Total {
		return nil, RefusedByTotal
	}
	if key != "" && c.per[key] >= limit {
		if !c.caps.MakeRoom || c.unproven[key] == 0 {
			return nil, RefusedByKey
		}
		v = AdmittedOverOne
	}
	p := &Place{key: key, own: own > 0}
	if p.own {
		c.own++
	} else {
		c.shared++
	}
	if key != "" {
		c.per[key]++
		c.unproven[key]++
	}
	return p, v
}

// Prove marks p's connection as having made its first request: it is
// no longer the one closed for another of its key (AdmittedOverOne).
func (c *Counter) Prove(p *Place) {
	if p.proven {
		return
	}
	p.proven = true
	if p.key != "" {
		dec(c.unproven, p.key)
	}
}

// Release gives back a place Admit counted.
func (c *Counter) Release(p *Place) {
	if p.own {
		c.own--
	} else {
		c.shared--
	}
	if p.key != "" {
		dec(c.per, p.key)
		if !p.proven {
			dec(c.unproven, p.key)
		}
	}
}

func dec(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// Open is how many connections are open, and how many of key's.
func (c *Counter) Open(key string) (total, ofKey int) { return c.shared + c.own, c.per[key] }
