package agent

// The scheduler's policy: the config's or a loaded one, run on every node
// (`roam policy load`, `roam policy show`), kept in the job table across
// restarts, and taken from the cluster's gossip (gossip.go).

import (
	"fmt"
	"net/http"
	"time"

	"roam/internal/agent/config"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/sched"
)

// setPolicy runs policy p of version ver, loaded at time at (see
// runPolicy), and keeps it in the job table for the next start.
func (a *Agent) setPolicy(p *sched.Scheduler, ver uint64, at time.Time) bool {
	if !a.runPolicy(p, ver, at) {
		return false
	}
	if a.store != nil && ver > 0 {
		if err := a.store.PutPolicy(job.LoadedPolicy{Text: p.Text(), At: at, Version: ver}); err != nil {
			a.log.Error("job table: keep the loaded policy", "err", err)
		}
	}
	return true
}

// runPolicy runs policy p of version ver unless the running one is newer
// (rounds.Newer); it reports whether p now runs. Jobs are not touched: a
// round in progress finishes its moves under the old policy.
func (a *Agent) runPolicy(p *sched.Scheduler, ver uint64, at time.Time) bool {
	old, ok := a.rounds.Take(rounds.Policy{Scheduler: p, Version: ver, At: at})
	if ok {
		a.policyRan(old.Scheduler, p)
	}
	return ok
}

// policyRan is what follows a change of policy from old to p.
func (a *Agent) policyRan(old, p *sched.Scheduler) {
	a.members.SetPlacement(p.Policy.Placement)
	if old != nil && old.Text() != p.Text() {
		a.event(api.Event{Kind: "policy", Why: fmt.Sprintf("policy %s replaced %s", p.Policy.Name, old.Policy.Name)})
	}
	a.rounds.Kick()
}

// keptPolicy runs the policy last loaded, as this node's job table kept
// it, instead of the config's: a loaded policy outlives restarts, of this
// node or of the whole cluster, until the next load. One that does not
// parse any more (written by another roam) is logged and left.
func (a *Agent) keptPolicy() {
	kept, ok, err := a.store.Policy()
	if err != nil || !ok {
		if err != nil {
			a.log.Warn("loaded policy not restored", "err", err)
		}
		return
	}
	p, err := sched.ParsePolicy([]byte(kept.Text))
	if err != nil {
		a.log.Warn("loaded policy not restored", "err", err)
		return
	}
	a.runPolicy(p, max(kept.Version, 1), kept.At) // already kept; a store of an older roam has no version
	a.log.Info("loaded policy restored", "policy", p.Policy.Name, "loaded", kept.At)
}

// policyText is what `roam policy show` prints of this node.
func (a *Agent) policyText() api.NodePolicy {
	p := a.rounds.Policy()
	return api.NodePolicy{Node: a.cfg.NodeID, Name: p.Policy.Name, Text: p.Text()}
}

// LoadPolicy is `roam policy load`: the policy (a built-in name or a
// file's text) is checked here, then given to every live node.
func (a *Agent) LoadPolicy(c Caller, req api.PolicyRequest) ([]api.NodePolicy, error) {
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
	ver := a.rounds.Policy().Version + 1
	if ver > rounds.MaxPolicyVersion { // a version kept from before the bound
		return nil, errkind.New(peer.ErrUnavailable, "policy load: the running policy's version %d is past the last one (%d)", ver-1, uint64(rounds.MaxPolicyVersion))
	}
	return fanOut[api.NodePolicy](a, http.MethodPost, peer.Policy, api.PolicyRequest{Text: text, At: time.Now(), Version: ver}), nil
}

// Policies is `roam policy show`: every live node's policy.
func (a *Agent) Policies() []api.NodePolicy {
	return fanOut[api.NodePolicy](a, http.MethodGet, peer.Policy, nil)
}

// Reload takes what of a changed config (roamd's SIGHUP) can change while
// the agent runs: the scheduler, unless a policy was loaded since the
// start (a load outlives the config, as it outlives restarts). It
// returns the keys it took and, apart, those that need a restart, each
// with why. cfg must have passed the same checks as at the start.
func (a *Agent) Reload(cfg Config) (took, restart []string) {
	for _, k := range config.Changes(a.cfg, cfg) {
		if k != "scheduler" {
			restart = append(restart, k)
			continue
		}
		p, err := cfg.Policy()
		if err == nil {
			if old, ok := a.rounds.Reconfigure(p, time.Now()); ok {
				a.policyRan(old.Scheduler, p)
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
