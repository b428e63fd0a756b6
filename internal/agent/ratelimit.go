package agent

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"roam/internal/agent/peer"
	"roam/internal/errkind"
)

// userRates holds a token bucket per non-root user of the API socket
// (limits.requests_per_second, bursts of four seconds' worth). A bucket
// idle for rateIdle is dropped, so the map holds only the users of late.
type userRates struct {
	mu    sync.Mutex
	per   rate.Limit
	burst int
	users map[uint32]*userRate
	swept time.Time
}

type userRate struct {
	lim  *rate.Limiter
	last time.Time
}

const rateIdle = 10 * time.Minute

func newUserRates(perSecond float64) *userRates {
	return &userRates{per: rate.Limit(perSecond), burst: int(4 * perSecond), users: map[uint32]*userRate{}}
}

// allow says whether uid may make a request at now.
func (u *userRates) allow(uid uint32, now time.Time) bool {
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
		r = &userRate{lim: rate.NewLimiter(u.per, u.burst)}
		u.users[uid] = r
	}
	r.last = now
	return r.lim.AllowN(now, 1)
}

// limitRate refuses a request past its caller's rate; a request without a
// caller (no credentials) is the handler's to refuse.
func (a *Agent) limitRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := callerOf(r); ok && !a.rates.allow(c.UID, time.Now()) {
			writeError(w, errkind.New(peer.ErrLimit, "too many requests: a user may make %v a second (limits.requests_per_second)", a.cfg.Limits.RequestsPerSecond))
			return
		}
		next.ServeHTTP(w, r)
	})
}
