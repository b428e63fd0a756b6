package scheduler

// The scheduler's policy: the config's or a loaded one, run on every node
// (`roam policy load`, `roam policy show`), kept in the job table across
// restarts, and taken from the cluster's gossip (package gossip).

import (
	"fmt"
	"net/http"
	"time"

	"roam/internal/agent/config"
	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/sched"
)

// SetPolicy runs policy p of version ver, loaded at time at (see
// runPolicy), and keeps it in the job table for the next start.
func (s *Scheduler) SetPolicy(p *sched.Scheduler, ver uint64, at time.Time) bool {
	if !s.runPolicy(p, ver, at) {
		return false
	}
	if s.c.Store != nil && ver > 0 {
		if err := s.c.Store.PutPolicy(job.LoadedPolicy{Text: p.Text(), At: at, Version: ver}); err != nil {
			s.c.Log.Error("job table: keep the loaded policy", "err", err)
		}
	}
	return true
}

// runPolicy runs policy p of version ver unless the running one is newer
// (rounds.Newer); it reports whether p now runs. Jobs are not touched: a
// round in progress finishes its moves under the old policy.
func (s *Scheduler) runPolicy(p *sched.Scheduler, ver uint64, at time.Time) bool {
	old, ok := s.c.Rounds.Take(rounds.Policy{Scheduler: p, Version: ver, At: at})
	if ok {
		s.policyRan(old.Scheduler, p)
	}
	return ok
}

// policyRan is what follows a change of policy from old to p.
func (s *Scheduler) policyRan(old, p *sched.Scheduler) {
	s.c.Members.SetPlacement(p.Policy.Placement, time.Duration(p.Policy.PreemptAfter))
	if old != nil && old.Text() != p.Text() {
		s.c.Event(api.Event{Kind: "policy", Why: fmt.Sprintf("policy %s replaced %s", p.Policy.Name, old.Policy.Name)})
	}
	s.c.Rounds.Kick()
}

// RestorePolicy runs the policy last loaded, as this node's job table
// kept it, instead of the config's: a loaded policy outlives restarts, of
// this node or of the whole cluster, until the next load. One that does
// not parse any more (written by another roam) is logged and left.
func (s *Scheduler) RestorePolicy() {
	kept, ok, err := s.c.Store.Policy()
	if err != nil || !ok {
		if err != nil {
			s.c.Log.Warn("loaded policy not restored", "err", err)
		}
		return
	}
	p, err := sched.ParsePolicy([]byte(kept.Text))
	if err != nil {
		s.c.Log.Warn("loaded policy not restored", "err", err)
		return
	}
	s.runPolicy(p, max(kept.Version, 1), kept.At) // already kept; a store of an older roam has no version
	s.c.Log.Info("loaded policy restored", "policy", p.Policy.Name, "loaded", kept.At)
}

// Policy is what `roam policy show` prints of this node (GET peer.Policy).
func (s *Scheduler) Policy() api.NodePolicy {
	p := s.c.Rounds.Policy()
	return api.NodePolicy{Node: s.c.Node, Name: p.Policy.Name, Text: p.Text()}
}

// LoadPolicy is `roam policy load`: the policy (a built-in name or a
// file's text) is checked here, then given to every live node.
func (s *Scheduler) LoadPolicy(c httpx.Caller, req api.PolicyRequest) ([]api.NodePolicy, error) {
	if c.UID != 0 {
		return nil, errkind.New(peer.ErrPermission, "policy load: only root changes the cluster's scheduler")
	}
	text := req.Text
	if t, ok := sched.Builtin[req.Name]; ok && text == "" {
		text = t
	} else if text == "" {
		return nil, errkind.New(peer.ErrBadRequest, "policy %q: not a built-in policy (%s)", req.Name, config.BuiltinPolicies())
	}
	// Checked here, so a bad policy is an error rather than left out of
	// every node's answer.
	if _, err := sched.ParsePolicy([]byte(text)); err != nil {
		return nil, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	ver := s.c.Rounds.Policy().Version + 1
	if ver > rounds.MaxPolicyVersion { // a version kept from before the bound
		return nil, errkind.New(peer.ErrUnavailable, "policy load: the running policy's version %d is past the last one (%d)", ver-1, uint64(rounds.MaxPolicyVersion))
	}
	req = api.PolicyRequest{Text: text, At: time.Now(), Version: ver}
	return peer.FanOut[api.NodePolicy](s.c.Peers, s.c.Log, s.c.Members.Live(), http.MethodPost, peer.Policy, req), nil
}

// Policies is `roam policy show`: every live node's policy.
func (s *Scheduler) Policies() []api.NodePolicy {
	return peer.FanOut[api.NodePolicy](s.c.Peers, s.c.Log, s.c.Members.Live(), http.MethodGet, peer.Policy, nil)
}

// TakePolicy is POST peer.Policy: `roam policy load` reaching this node.
func (s *Scheduler) TakePolicy(req api.PolicyRequest) (api.NodePolicy, error) {
	if req.Version > rounds.MaxPolicyVersion {
		return api.NodePolicy{}, errkind.New(peer.ErrBadRequest, "policy version %d: past the last one (%d)", req.Version, uint64(rounds.MaxPolicyVersion))
	}
	p, err := sched.ParsePolicy([]byte(req.Text))
	if err != nil {
		return api.NodePolicy{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if req.At.IsZero() {
		req.At = time.Now()
	}
	if req.Version == 0 { // an older roam's load: after everything this node knows
		req.Version = s.c.Rounds.Policy().Version + 1
	}
	s.SetPolicy(p, req.Version, req.At)
	return s.Policy(), nil
}

// Reload takes what of a changed config (roamd's SIGHUP) can change while
// the agent runs: the scheduler, unless a policy was loaded since the
// start (a load outlives the config, as it outlives restarts). It
// returns the keys of cfg that differ from old and it took and, apart,
// those that need a restart, each with why. cfg must have passed the
// same checks as at the start.
func (s *Scheduler) Reload(old, cfg config.Config) (took, restart []string) {
	for _, k := range config.Changes(old, cfg) {
		if k != "scheduler" {
			restart = append(restart, k)
			continue
		}
		p, err := cfg.Policy()
		if err == nil {
			if was, ok := s.c.Rounds.Reconfigure(p, time.Now()); ok {
				s.policyRan(was.Scheduler, p)
				took = append(took, k)
				continue
			}
		}
		if err != nil {
			restart = append(restart, fmt.Sprintf("scheduler (%v)", err))
		} else {
			restart = append(restart, "scheduler (a policy loaded with roam policy load runs; load the new one so)")
		}
	}
	return took, restart
}
