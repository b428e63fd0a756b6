package connlimit

// Caps are a listener's caps on the connections it holds at once.
type Caps struct {
	// Total is the most connections open at once, PerKey the most of
	// one key; a connection of key "" is held to Total only.
	Total, PerKey int
	// Own are keys held to a cap of their own, outside Total and PerKey
	// (root on the roam socket: the users together can fill Total, and
	// root must still get in to see why).
	Own map[string]int
}

// Counter counts a listener's open connections by key and decides, for
// one more, whether it is within the caps. It is the listener's whole
// policy, and does no I/O; the Listener holds a lock around it.
type Counter struct {
	caps   Caps
	shared int // the connections held to Total
	per    map[string]int
}

// NewCounter counts against caps.
func NewCounter(caps Caps) *Counter { return &Counter{caps: caps, per: map[string]int{}} }

// Admit counts one more connection of key when it is within the caps,
// and says so; when it is not, nothing is counted, and byTotal says
// whether the total (rather than key's own cap) refused it.
func (c *Counter) Admit(key string) (ok, byTotal bool) {
	if own, mine := c.caps.Own[key]; mine {
		if c.per[key] >= own {
			return false, false
		}
		c.per[key]++
		return true, false
	}
	switch {
	case c.shared >= c.caps.Total:
		return false, true
	case key != "" && c.per[key] >= c.caps.PerKey:
		return false, false
	}
	c.shared++
	if key != "" {
		c.per[key]++
	}
	return true, false
}

// Release gives back the place of a connection of key that Admit
// counted.
func (c *Counter) Release(key string) {
	if _, mine := c.caps.Own[key]; !mine {
		c.shared--
	}
	if key != "" {
		if c.per[key]--; c.per[key] <= 0 {
			delete(c.per, key)
		}
	}
}

// Open is how many connections are open, and how many of key's.
func (c *Counter) Open(key string) (total, ofKey int) {
	total = c.shared
	for k := range c.caps.Own {
		total += c.per[k]
	}
	return total, c.per[key]
}
