package observe

import (
	"sort"
	"time"

	"roam/internal/api"
)

// Scope is who a page is for: root sees everything; a user (a token's
// uid) their own jobs by name and others' as counts; a page without a
// token node figures and counts only.
type Scope struct {
	// User: the page has a token, for UID. UID 0 is root.
	User bool
	UID  uint32
}

// Root says whether the scope sees everything.
func (s Scope) Root() bool { return s.User && s.UID == 0 }

// sees says whether the scope may see a job of uid by name.
func (s Scope) sees(uid uint32) bool { return s.Root() || (s.User && s.UID == uid) }

// String names the scope for the page's header.
func (s Scope) String() string {
	switch {
	case s.Root():
		return "root"
	case s.User:
		return "uid " + itoa(s.UID)
	}
	return "anonymous"
}

// NodeView is a node's figures on a page, as this node knows them.
type NodeView struct {
	ID       string   `json:"id"`
	Alive    bool     `json:"alive"`
	Self     bool     `json:"self,omitempty"`
	Draining bool     `json:"draining,omitempty"`
	Capacity float64  `json:"capacity"`
	Load     *float64 `json:"load"`
	MemFree  *float64 `json:"mem_free_bytes"`
	Version  string   `json:"version,omitempty"`
}

// nodeViews are a membership's figures, in base units.
func nodeViews(ns []api.NodeInfo) []NodeView {
	out := make([]NodeView, 0, len(ns))
	for _, n := range ns {
		v := NodeView{ID: n.ID, Alive: n.Alive, Self: n.Self, Draining: n.Draining, Capacity: n.Capacity, Load: n.Load, Version: n.Version}
		if n.MemFreeMB != nil {
			b := *n.MemFreeMB * (1 << 20)
			v.MemFree = &b
		}
		out = append(out, v)
	}
	return out
}

// JobView is one job a page shows by name.
type JobView struct {
	ID         string `json:"id"`
	User       string `json:"user"`
	Cmd        string `json:"cmd"`
	Home       string `json:"home"`
	Node       string `json:"node"`
	State      string `json:"state"`
	Migrations int    `json:"migrations"`
}

// JobsView is what a page shows of the jobs not ended: the scope's own by
// name, the rest as counts by node and state; Pending counts the jobs of
// all not yet started on their node (a sweep's waiting ones too), and
// Total every live job by state.
type JobsView struct {
	Jobs    []JobView                 `json:"jobs"`
	Others  map[string]map[string]int `json:"others"`
	Pending int                       `json:"pending"`
	Total   map[string]int            `json:"total"`
}

// live says whether a job is shown: not ended.
func live(state string) bool { return state != api.StateFinished }

// Jobs builds a scope's view of every job.
func Jobs(s Scope, jobs []api.Job) JobsView {
	v := JobsView{Jobs: []JobView{}, Others: map[string]map[string]int{}, Total: map[string]int{}}
	for _, j := range jobs {
		if !live(j.State) {
			continue
		}
		v.Total[j.State]++
		if j.State == api.StateStarting || j.State == api.StatePending {
			v.Pending++
		}
		if s.sees(j.UID) {
			v.Jobs = append(v.Jobs, JobView{ID: j.ID, User: j.User, Cmd: j.Cmd, Home: j.Home, Node: j.Node, State: j.State, Migrations: j.Migrations})
			continue
		}
		if v.Others[j.Node] == nil {
			v.Others[j.Node] = map[string]int{}
		}
		v.Others[j.Node][j.State]++
	}
	sort.Slice(v.Jobs, func(a, b int) bool { return v.Jobs[a].ID < v.Jobs[b].ID })
	return v
}

// EventView is a migration, placement or other decision on a page. Job
// and Why are left out of another user's job's event.
type EventView struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	Job  string    `json:"job,omitempty"`
	From string    `json:"from,omitempty"`
	To   string    `json:"to,omitempty"`
	Why  string    `json:"why,omitempty"`
	// FreezeMS is a migration's freeze.
	FreezeMS float64 `json:"freeze_ms,omitempty"`
	// Seen is when this node learnt of it: the page's delay is measured
	// from it.
	Seen time.Time `json:"seen"`
}

// event is an event as the hub keeps it: with its owner, if known.
type event struct {
	EventView
	uid   uint32
	owned bool // uid is known
}

// Event is e as scope s may see it.
func (e event) view(s Scope) EventView {
	v := e.EventView
	if v.Job != "" && !(s.Root() || (s.User && e.owned && e.uid == s.UID)) {
		v.Job, v.Why = "", ""
	}
	return v
}

func itoa(u uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		if u /= 10; u == 0 {
			return string(b[i:])
		}
	}
}
