package observe

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sync"
	"time"
)

// ErrTooManyTokens is Mint's refusal when maxTokens are alive.
var ErrTooManyTokens = errors.New("web tokens: too many alive on this node; try again when some expire")

// Tokens are the web view's tokens: 32 random bytes each, minted for a
// uid, alive for a bounded time, at most so many in all and per uid. Only
// their SHA-256 is kept, and a token is compared with every kept one in
// constant time. Safe for concurrent use.
type Tokens struct {
	mu     sync.Mutex
	ttl    time.Duration
	max    int
	perUID int
	kept   []token // oldest first
}

type token struct {
	sum     [sha256.Size]byte
	uid     uint32
	expires time.Time
}

// NewTokens makes a store with the given bounds.
func NewTokens(ttl time.Duration, max, perUID int) *Tokens {
	return &Tokens{ttl: ttl, max: max, perUID: perUID}
}

// Mint makes a token for uid, valid until the time it returns. A uid at
// its bound loses its oldest token.
func (t *Tokens) Mint(uid uint32, now time.Time) (string, time.Time, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, err
	}
	s := base64.RawURLEncoding.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	n, oldest := 0, -1
	for i, k := range t.kept {
		if k.uid == uid {
			if n++; oldest < 0 {
				oldest = i
			}
		}
	}
	switch {
	case n >= t.perUID:
		t.kept = append(t.kept[:oldest], t.kept[oldest+1:]...)
	case len(t.kept) >= t.max:
		return "", time.Time{}, ErrTooManyTokens
	}
	exp := now.Add(t.ttl)
	t.kept = append(t.kept, token{sum: sha256.Sum256([]byte(s)), uid: uid, expires: exp})
	return s, exp, nil
}

// Check returns the uid a live token was minted for, and when it
// expires.
func (t *Tokens) Check(s string, now time.Time) (uint32, time.Time, bool) {
	sum := sha256.Sum256([]byte(s))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	var uid uint32
	var exp time.Time
	found := 0
	for _, k := range t.kept { // every one, no early exit
		eq := subtle.ConstantTimeCompare(sum[:], k.sum[:])
		uid |= uint32(subtle.ConstantTimeSelect(eq, int(k.uid), 0))
		if eq == 1 {
			exp = k.expires
		}
		found |= eq
	}
	return uid, exp, found == 1
}

// Len is how many tokens are alive.
func (t *Tokens) Len(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	return len(t.kept)
}

// expire drops the tokens past their time; t.mu is held.
func (t *Tokens) expire(now time.Time) {
	i := 0
	for _, k := range t.kept {
		if now.Before(k.expires) {
			t.kept[i] = k
			i++
		}
	}
	t.kept = t.kept[:i]
}
