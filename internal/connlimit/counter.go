package connlimit

// Caps are a listener's caps on the connections it holds at once.
type Caps struct {
	// Total is the most connections open at once, PerKey the most of
	// one key; a connection of key "" is held to Total only.
	Total, PerKey int
}

// Counter counts a listener's open connections by key and decides, for
// one more, whether it is within the caps. It is the listener's whole
// policy, and does no I/O; the Listener holds a lock around it.
type Counter struct {
	caps   Caps
	shared int // the connections held to Total
	own    int // those held to caps of their own
	per    map[string]int
}

// NewCounter counts against caps.
func NewCounter(caps Caps) *Counter { return &Counter{caps: caps, per: map[string]int{}} }

// Place is an admitted connection's place in the counts, which Release
// gives back.
type Place struct {
	key string
	own bool
}

// Admit counts one more connection of key when it is within the caps,
// and says so; when it is not, nothing is counted, and byTotal says
// whether the total (rather than key's cap) refused it. own > 0 holds
// the key to a cap of its own instead, outside Total and PerKey: root on
// the roam socket, whom the users together must not lock out; a member's
// address on the peer port, which strangers' connections must not crowd
// out.
func (c *Counter) Admit(key string, own int) (p Place, ok, byTotal bool) {
	if own > 0 {
		if c.per[key] >= own {
			return Place{}, false, false
		}
		c.own++
		c.per[key]++
		return Place{key: key, own: true}, true, false
	}
	switch {
	case c.shared >= c.caps.Total:
		return Place{}, false, true
	case key != "" && c.per[key] >= c.caps.PerKey:
		return Place{}, false, false
	}
	c.shared++
	if key != "" {
		c.per[key]++
	}
	return Place{key: key}, true, false
}

// Release gives back a place Admit counted.
func (c *Counter) Release(p Place) {
	if p.own {
		c.own--
	} else {
		c.shared--
	}
	if p.key != "" {
		if c.per[p.key]--; c.per[p.key] <= 0 {
			delete(c.per, p.key)
		}
	}
}

// Open is how many connections are open, and how many of key's.
func (c *Counter) Open(key string) (total, ofKey int) { return c.shared + c.own, c.per[key] }
