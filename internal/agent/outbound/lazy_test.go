package outbound

import (
	"strings"
	"testing"

	"roam/internal/agent/members"
	"roam/internal/cpufeat"
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

// A job in a user namespace of its own goes only to a node whose users'
// jobs run in user namespaces too; any other job goes anywhere, and a
// node not known yet is left to its own check.
func TestRestorableAt(t *testing.T) {
	for _, c := range []struct {
		ownUserNS, known bool
		dest             members.Member
		ok               bool
	}{
		{false, true, members.Member{}, true},
		{true, true, members.Member{UserNS: true}, true},
		{true, false, members.Member{}, true},
		{true, true, members.Member{}, false},
		{true, true, members.Member{LazyUserNS: true}, false},
	} {
		err := restorableAt("3", c.ownUserNS, cpufeat.Set{}, c.dest, c.known)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "node 3 cannot restore a job in a user namespace")) {
			t.Errorf("restorableAt(own user ns %v, known %v, %+v) = %v; want ok %v", c.ownUserNS, c.known, c.dest, err, c.ok)
		}
	}
}
