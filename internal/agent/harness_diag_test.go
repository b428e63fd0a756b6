package agent

// What a harness failure says of a job that did not settle: where its
// copies are in the fake kernel, what every node's migration ledger holds
// of it, what its home logged of its moves, and the agents' log lines
// that name it or one of its migrations.

import (
	"fmt"
	"sort"
	"strings"
)

// unsettled are the jobs of ids that do not have exactly one copy, running.
func (c *cluster) unsettled(ids []string) []string {
	var out []string
	for _, id := range ids {
		if run, fz := c.world.copies(id); len(run) != 1 || len(fz) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// explain logs what the harness knows of job id (above), for a failure.
func (c *cluster) explain(id string) {
	c.t.Helper()
	var lines []string
	dead := 0
	c.world.mu.Lock()
	for _, p := range c.world.procs {
		switch {
		case p.job != id:
		case p.state == gone:
			dead++
		default:
			lines = append(lines, fmt.Sprintf("  process %s:%d tix %d state %c stopped %v", p.node, p.pid, p.tix, p.state, p.stopped))
		}
	}
	ended := c.world.ended[id]
	c.world.mu.Unlock()
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("  %d copies gone; ended by the harness: %v", dead, ended))
	mids := map[string]bool{}
	c.mu.Lock()
	nodes := append([]*hnode(nil), c.nodes...)
	c.mu.Unlock()
	for _, h := range nodes {
		if h.a == nil {
			continue
		}
		if l, ok := h.a.jobs.LocalRec(id); ok {
			lines = append(lines, fmt.Sprintf("  %s local job: pid %d tix %d moves %d", h.name, l.PID, l.StartTix, l.Moves))
		}
		outs, _ := h.a.store.Outs()
		for _, r := range outs {
			if r.Job == id {
				mids[r.MID] = true
				lines = append(lines, fmt.Sprintf("  %s out %+v", h.name, r))
			}
		}
		ins, _ := h.a.store.Ins()
		for _, r := range ins {
			if r.Job == id {
				mids[r.MID] = true
				r.Header, r.Grant = nil, nil
				lines = append(lines, fmt.Sprintf("  %s in %+v", h.name, r))
			}
		}
	}
	home := c.homeRec(id)
	exit := "none"
	if home.ExitCode != nil {
		exit = fmt.Sprint(*home.ExitCode)
	}
	lines = append(lines, fmt.Sprintf("  home record: node %s state %s inc %d ended %v exit %s %q", home.Node, home.State, home.Inc,
		home.Ended, exit, home.EndReason))
	for _, m := range home.MigrationLog[max(0, len(home.MigrationLog)-5):] {
		lines = append(lines, fmt.Sprintf("  home log: %s %s->%s ok %v lazy %v err %q", m.MID, m.From, m.To, m.OK, m.Lazy, m.Error))
	}
	c.t.Logf("job %s:\n%s", id, strings.Join(lines, "\n"))
	c.t.Logf("log lines of job %s and its migrations:\n%s", id, strings.Join(c.logLines(id, mids), "\n"))
}

// logLines are the captured log lines naming job id or one of mids, the
// last 200 of them.
func (c *cluster) logLines(id string, mids map[string]bool) []string {
	if c.logs == nil {
		return []string{"  (not captured)"}
	}
	c.logs.mu.Lock()
	all := strings.Split(c.logs.b.String(), "\n")
	c.logs.mu.Unlock()
	var out []string
	for _, l := range all {
		hit := strings.Contains(l, "job="+id+" ") || strings.HasSuffix(l, "job="+id)
		for mid := range mids {
			hit = hit || strings.Contains(l, mid)
		}
		if hit {
			out = append(out, "  "+l)
		}
	}
	return out[max(0, len(out)-200):]
}
