package bench

import (
	"fmt"
	"sync"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// The emulated clusters a benchmark has up, so that a benchmark stopped by
// a signal can take them down (TearDown): a cluster left up holds network
// namespaces, a bridge, cgroups and agents until someone runs roam cluster
// down.
var clusters struct {
	sync.Mutex
	up map[string]bool
}

// up brings a cluster up and remembers it. A cluster that fails to come
// up is taken down again, once Up recorded it (st.Name: it made the
// cluster's state, so what there is of it is this run's): left half up,
// it held namespaces, a bridge, cgroups and agents, and every later run
// of the benchmark refused to start. One Up refused before it recorded
// anything (a name or subnet in use) names somebody else's cluster, which
// stays.
func up(spec emu.Spec) (emu.State, error) {
	clusters.Lock()
	defer clusters.Unlock()
	st, err := emu.Up(spec)
	if err != nil && st.Name != "" {
		_ = emu.Down(spec.Name)
	}
	if err == nil {
		if clusters.up == nil {
			clusters.up = map[string]bool{}
		}
		clusters.up[spec.Name] = true
	}
	return st, err
}

// down takes a cluster down and forgets it.
func down(name string) error {
	clusters.Lock()
	defer clusters.Unlock()
	delete(clusters.up, name)
	return emu.Down(name)
}

// TearDown takes down every cluster a benchmark of this process has up,
// and returns their names. A benchmark running then fails at its next
// step; the caller exits.
func TearDown() []string {
	clusters.Lock()
	defer clusters.Unlock()
	var names []string
	for name := range clusters.up {
		_ = emu.Down(name)
		names = append(names, name)
	}
	clear(clusters.up)
	return names
}

// waitMembers waits until the agent sees n members alive.
func waitMembers(cl *api.Client, n int) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ns []api.NodeInfo
		if cl.Get(api.PathNodes, &ns) == nil && countAlive(ns) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("membership incomplete after 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
