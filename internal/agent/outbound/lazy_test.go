package outbound

import (
	"strings"
	"testing"

	"roam/internal/agent/members"
)

// A lazy migration stays lazy unless the job is in a user namespace of its
// own and the destination has not said that its CRIU restores such a job
// lazily (an older roam does not say); then it is eager, and says why.
func TestLazyTo(t *testing.T) {
	for _, c := range []struct {
		ownUserNS bool
		dest      members.Member
		lazy      bool
	}{
		{false, members.Member{}, true},
		{false, members.Member{LazyUserNS: true}, true},
		{true, members.Member{UserNS: true, LazyUserNS: true}, true},
		{true, members.Member{LazyUserNS: true}, true},
		{true, members.Member{UserNS: true}, false},
		{true, members.Member{}, false},
	} {
		lazy, why := lazyTo("3", c.ownUserNS, c.dest)
		if lazy != c.lazy || (!lazy && !strings.Contains(why, "node 3")) || (lazy && why != "") {
			t.Errorf("lazyTo(own user ns %v, %+v) = %v, %q; want %v", c.ownUserNS, c.dest, lazy, why, c.lazy)
		}
	}
}
