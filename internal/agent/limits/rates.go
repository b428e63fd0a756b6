package limits

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rates holds a token bucket per non-root user of the API socket
// (limits.requests_per_second, bursts of four seconds' worth). A bucket
// idle for rateIdle is dropped, so the map holds only the users of late.
// Its lock is a leaf: nothing is taken under it.
type Rates struct {
	mu        sync.Mutex
	perSecond float64
	burst     int
	users     map[uint32]*userRate
	swept     time.Time
}

type userRate struct {
	lim  *rate.Limiter
	last time.Time
}

// rateIdle is how long a user's bucket is kept without a request.
const rateIdle = 10 * time.Minute

// NewRates makes the buckets of perSecond requests a user.
func NewRates(perSecond float64) *Rates {
	return &Rates{perSecond: perSecond, burst: int(4 * perSecond), users: map[uint32]*userRate{}}
}

// PerSecond is the requests a user may make a second.
func (u *Rates) PerSecond() float64 { return u.perSecond }

// Allow says whether uid may make a request at now; root always may.
func (u *Rates) Allow(uid uint32, now time.Time) bool {
	if uid == 0 {
		return true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.swept) > rateIdle {
		for id, r := range u.users {
			if now.Sub(r.last) > rateIdle {
				delete(u.users, id)
			}
		}
		u.swept = now
	}
	r := u.users[uid]
	if r == nil {
		r = &userRate{lim: rate.NewLimiter(rate.Limit(u.perSecond), u.burst)}
		u.users[uid] = r
	}
	r.last = now
	return r.lim.AllowN(now, 1)
}
