package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"roam/internal/api"
	"roam/internal/sched"
)

func (e *env) policyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "policy",
		Short: "show or change the cluster's scheduler while jobs run",
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "print the policy every node runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var ps []api.NodePolicy
			if err := cl.Get(api.PathPolicy, &ps); err != nil {
				return err
			}
			return e.result(ps, func() error {
				printPolicies(e, ps)
				return nil
			})
		},
	}
	load := &cobra.Command{
		Use:   "load NAME|FILE",
		Short: "give every node a policy: a built-in one (static, balance, ushering, threshold, mosix, feedback) or a policy file",
		Long: `Loads a scheduling policy on every live node, replacing the one it runs.
Running jobs are not touched; the new probes, analyzers and managers take
over from the next round. NAME is a built-in policy; anything else is read
as a YAML policy file (see docs/scheduler.md).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicy,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.PolicyRequest{Name: args[0]}
			if _, ok := sched.Builtin[args[0]]; !ok {
				b, err := os.ReadFile(args[0])
				if err != nil {
					return fmt.Errorf("policy %s: not a built-in policy and not a readable file: %v", args[0], err)
				}
				if _, err := sched.ParsePolicy(b); err != nil {
					return err
				}
				req = api.PolicyRequest{Text: string(b)}
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			var ps []api.NodePolicy
			if err := cl.Do(context.Background(), http.MethodPost, api.PathPolicy, req, &ps); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(ps)
			}
			var nodes []string
			for _, p := range ps {
				nodes = append(nodes, p.Node)
			}
			name := ""
			if len(ps) > 0 {
				name = ps[0].Name
			}
			fmt.Fprintf(e.out, "policy %s loaded on nodes %s\n", name, strings.Join(nodes, ", "))
			return nil
		},
	}
	c.AddCommand(jsonVia(jsonValue, show), jsonVia(jsonValue, load))
	return c
}

// printPolicies prints one policy when all nodes run the same, else each.
func printPolicies(e *env, ps []api.NodePolicy) {
	byText := map[string][]string{}
	var order []string
	for _, p := range ps {
		if _, ok := byText[p.Text]; !ok {
			order = append(order, p.Text)
		}
		byText[p.Text] = append(byText[p.Text], p.Node)
	}
	for _, text := range order {
		fmt.Fprintf(e.out, "# nodes %s\n%s", strings.Join(byText[text], ", "), text)
	}
}

func (e *env) eventsCmd() *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "events [-f]",
		Short: "the scheduler's decisions on every node: time, job, from, to, why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var since time.Time
			seen := map[string]bool{}
			for {
				var evs []api.Event
				if err := cl.Get(api.PathEvents+"?since="+since.Format(time.RFC3339Nano), &evs); err != nil {
					return err
				}
				for _, ev := range evs {
					key := ev.At.Format(time.RFC3339Nano) + ev.Node + ev.Job + ev.Kind
					if seen[key] {
						continue
					}
					seen[key] = true
					if e.json {
						if err := e.record(ev); err != nil {
							return err
						}
					} else {
						fmt.Fprintln(e.out, formatEvent(ev))
					}
					if ev.At.After(since) {
						// Clocks of emulated nodes are one clock; a
						// second back covers real clusters' skew.
						since = ev.At.Add(-time.Second)
					}
				}
				if !follow {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	return jsonVia(jsonStream, c)
}

func formatEvent(ev api.Event) string {
	from := ev.From
	if from == "" {
		from = "-"
	}
	to := ev.To
	if to == "" {
		to = "-"
	}
	job := ev.Job
	if job == "" {
		job = "-"
	}
	return fmt.Sprintf("%s  %-7s %-8s %3s -> %-3s %s", ev.At.Local().Format("15:04:05.000"), shown(ev.Kind), shown(job), shown(from), shown(to), shown(ev.Why))
}

// ---- roam top ----

func (e *env) topCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "top",
		Short: "live view of the cluster: load and jobs per node, migrations as they happen (q quits)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			m := topModel{cl: cl, started: time.Now()}
			_, err = tea.NewProgram(m, tea.WithAltScreen()).Run()
			return err
		},
	}
}

type topData struct {
	nodes  []api.NodeInfo
	jobs   []api.Job
	events []api.Event
	err    error
}

type topModel struct {
	cl      *api.Client
	started time.Time
	data    topData
	width   int
}

func (m topModel) fetch() tea.Cmd {
	return func() tea.Msg {
		var d topData
		if d.err = m.cl.Get(api.PathNodes, &d.nodes); d.err != nil {
			return d
		}
		_ = m.cl.Get(api.PathPS+"?all=1", &d.jobs)
		_ = m.cl.Get(api.PathEvents+"?since="+m.started.Format(time.RFC3339Nano), &d.events)
		return d
	}
}

type tick struct{}

func (m topModel) Init() tea.Cmd { return m.fetch() }

func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		if s := msg.String(); s == "q" || s == "ctrl+c" {
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case topData:
		m.data = msg
		return m, tea.Tick(time.Second, func(time.Time) tea.Msg { return tick{} })
	case tick:
		return m, m.fetch()
	}
	return m, nil
}

var (
	topTitle = lipgloss.NewStyle().Bold(true)
	topBar   = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	topOver  = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	topDim   = lipgloss.NewStyle().Faint(true)
)

func (m topModel) View() string {
	var b strings.Builder
	b.WriteString(topTitle.Render(fmt.Sprintf("roam top — %s — q quits", time.Now().Format("15:04:05"))) + "\n\n")
	if m.data.err != nil {
		b.WriteString(topOver.Render("error: "+m.data.err.Error()) + "\n")
		return b.String()
	}
	perNode := map[string][]string{}
	for _, j := range m.data.jobs {
		if j.State == api.StateRunning || j.State == api.StateStopped {
			perNode[j.Node] = append(perNode[j.Node], j.ID)
		}
	}
	nodes := append([]api.NodeInfo(nil), m.data.nodes...)
	sort.Slice(nodes, func(i, j int) bool { return sched.IDLess(nodes[i].ID, nodes[j].ID) })
	b.WriteString(fmt.Sprintf("%-5s %-6s %5s %8s %9s  %-30s %s\n", "NODE", "STATE", "CPU", "LOAD", "FREE MiB", "LOAD/CAPACITY", "JOBS"))
	for _, n := range nodes {
		state := "alive"
		if !n.Alive {
			state = "dead"
		}
		// One cell per tenth of load per capacity, 30 cells = 3.0.
		load, free := 0.0, 0.0
		if n.Load != nil {
			load = *n.Load
		}
		if n.MemFreeMB != nil {
			free = *n.MemFreeMB
		}
		cells := int(load*10 + 0.5)
		bar := strings.Repeat("█", min(cells, 30))
		style := topBar
		if load > 1 {
			style = topOver
		}
		jobs := perNode[n.ID]
		sort.Strings(jobs)
		list := strings.Join(jobs, " ")
		if len(list) > 40 {
			list = list[:37] + "..."
		}
		b.WriteString(fmt.Sprintf("%-5s %-6s %5.2f %8.2f %9.0f  %s %s %d: %s\n", n.ID, state, n.Capacity, load, free,
			style.Render(bar), strings.Repeat(" ", 30-min(cells, 30)), len(jobs), list))
	}
	b.WriteString("\n" + topTitle.Render("migrations") + "\n")
	var moves []api.Event
	for _, ev := range m.data.events {
		if ev.Kind == "migrate" || ev.Kind == "failed" || ev.Kind == "policy" {
			moves = append(moves, ev)
		}
	}
	if len(moves) > 8 {
		moves = moves[len(moves)-8:]
	}
	if len(moves) == 0 {
		b.WriteString(topDim.Render("none yet") + "\n")
	}
	for _, ev := range moves {
		line := formatEvent(ev)
		if m.width > 0 && len(line) > m.width {
			line = line[:m.width-1]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
