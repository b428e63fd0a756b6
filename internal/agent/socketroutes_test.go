package agent

import (
	"go/token"
	"path/filepath"
	"slices"
	"testing"

	"roam/internal/agent/observe"
)

// socketRoutesCovered are the routes observe.Server.SocketRoutes may put
// on the roam socket (roamd passes it as Parts.Routes): the ones
// TestSocketRoutesGetTheSocketsCaller covers.
var socketRoutesCovered = []string{observe.TokenRoute}

// A route roamd adds to the socket through Parts.Routes escapes
// TestAuthzMatrixCoversEveryRoute, which reads apiRoutes. This test reads
// observe.Server.SocketRoutes with the matrix's reader (authzFollow):
// every route it registers must be one TestSocketRoutesGetTheSocketsCaller
// covers, and it may do nothing else with its mux (a route registered
// elsewhere would escape this test too).
func TestSocketRoutesAreCovered(t *testing.T) {
	fset := token.NewFileSet()
	paths := authzPeerPaths(t, fset)
	funcs := authzFuncs(t, fset, filepath.Join("observe", "*.go"), paths)
	if fd := funcs["SocketRoutes"]; fd == nil || fd.Recv == nil {
		t.Fatal("package observe has no method SocketRoutes")
	}
	routes := authzFollow(t, fset, funcs, "SocketRoutes", paths)
	for _, r := range routes {
		if !slices.Contains(socketRoutesCovered, r) {
			t.Errorf("SocketRoutes registers %s, which no test of who may use it covers: add it to TestSocketRoutesGetTheSocketsCaller and to socketRoutesCovered", r)
		}
	}
	if len(routes) == 0 {
		t.Error("SocketRoutes registers no route: the token route is gone, or this test no longer reads it")
	}
}
