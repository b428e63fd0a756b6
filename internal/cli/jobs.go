package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"roam/internal/api"
	"roam/internal/resources"
	"roam/internal/sweep"
)

// reattachFor is how long `roam run` waits for a lost agent to come back.
const reattachFor = 5 * time.Minute

// followWidth bounds the jobs one roam run or attach follows at once:
// each is a long poll of the agent (limits' request rate counts them).
const followWidth = 64

// parseRequest reads --cpus and --mem into req ("": not given, the
// home's default). A --mem that names a field of the --args-from lines
// (--mem {2}M) gives each index the request its line says (req.Mems).
func parseRequest(req *api.RunRequest, cpus, mem string) error {
	if cpus != "" {
		m, err := resources.ParseCPUs(cpus)
		if err != nil {
			return err
		}
		req.CPUs = float64(m) / resources.MilliPerCPU
	}
	if sweep.HasRef(mem) {
		return eachMem(req, mem)
	}
	if mem != "" {
		b, err := resources.ParseMem(mem)
		if err != nil {
			return err
		}
		req.MemBytes = b
	}
	return nil
}

// eachMem is --mem with a field of each --args-from line in it: index
// i's request is its line's; an error names the line.
func eachMem(req *api.RunRequest, mem string) error {
	if len(req.Args) == 0 {
		return fmt.Errorf("--mem %s: {N} is a field of each --args-from line; give --args-from FILE", mem)
	}
	req.Mems = make([]int64, len(req.Args))
	for i, line := range req.Args {
		v, err := sweep.Field(mem, line)
		if err != nil {
			return fmt.Errorf("--mem %s: --args-from line %d: %v", mem, i+1, err)
		}
		if req.Mems[i], err = resources.ParseMem(v); err != nil {
			return fmt.Errorf("--args-from line %d: %w", i+1, err)
		}
	}
	return nil
}

// at is s[i], or "" past its end.
func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func (e *env) attachCmd() *cobra.Command {
	return withJobStatus(jsonVia(jsonStream, &cobra.Command{
		Use:               "attach JOBID|SWEEP...",
		Short:             "follow jobs' or sweeps' output from the start and exit with their status (as roam run: see its EXIT STATUS)",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: e.completeJobs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			ids, _, err := expandRefs(cl, args)
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return fmt.Errorf("%s: no job", strings.Join(args, " "))
			}
			if err := reachable(cl, ids[0]); err != nil {
				return err
			}
			relay := startRelay(cl)
			defer relay.stop()
			relay.forward(args)
			err = e.follow(cl, ids, len(ids) > 1, false)
			for _, ref := range sweepArgs(args) {
				e.summarize(cl, ref)
			}
			return err
		},
	}))
}

func (e *env) logsCmd() *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:               "logs [-f] JOBID|SWEEP",
		Short:             "a job's output so far (stdout here, stderr to stderr), or a sweep's, prefixed by job id",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeJobs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			ids, _, err := expandRefs(cl, args)
			if err != nil || len(ids) == 0 {
				return err
			}
			if follow {
				if err := reachable(cl, ids[0]); err != nil {
					return err
				}
				err := e.follow(cl, ids, len(ids) > 1, false)
				var ec exitCode
				if errors.As(err, &ec) {
					return nil // logs reports output, not the job's status
				}
				return err
			}
			for _, id := range ids {
				if err := e.logsSoFar(cl, id, len(ids) > 1); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep following until the job ends")
	return jsonVia(jsonStream, c)
}

// logsSoFar prints a job's output so far.
func (e *env) logsSoFar(cl *api.Client, id string, prefix bool) error {
	var outOff, errOff int64
	out, errw := e.outputWriters(id, prefix)
	defer out.Flush()
	defer errw.Flush()
	for {
		o, err := getOutput(cl, id, outOff, errOff, 0)
		if err != nil {
			return err
		}
		out.Write(o.Stdout)
		errw.Write(o.Stderr)
		if len(o.Stdout) == 0 && len(o.Stderr) == 0 {
			out.Flush()
			errw.Flush()
			e.cutNote(id, o.Cut)
			return nil
		}
		outOff, errOff = o.StdoutOff, o.StderrOff
	}
}

// cutNote tells, on stderr (with --json, a record of kind cut), that job
// id's output lacks what cut says (api.Output.Cut), under e.outMu: a
// sweep's followers print at once.
func (e *env) cutNote(id, cut string) {
	if cut == "" {
		return
	}
	e.outMu.Lock()
	defer e.outMu.Unlock()
	if e.json {
		_ = e.record(jobRecord{Job: id, Kind: "cut", Why: cut})
		return
	}
	fmt.Fprintf(e.errOut, "roam: %s: output incomplete: %s\n", id, shown(cut))
}

// reachable fails when no agent answers: a follower waits for an agent
// lost while it follows (reattachFor), not for one that was never there.
func reachable(cl *api.Client, id string) error {
	_, err := getOutput(cl, id, 0, 0, 0)
	if errors.Is(err, api.ErrNoAgent) {
		return err
	}
	return nil
}

// getOutput reads job id's output from the given offsets, waiting up to
// wait for news. A request past the user's rate (limits.requests_per_second, which an
// attached run of a large sweep reaches as its jobs end: each followed
// job's end is a request) is made again after a pause, growing to a
// second: the output waits at its home, and the run follows it at the
// rate the node allows.
func getOutput(cl *api.Client, id string, outOff, errOff int64, wait time.Duration) (api.Output, error) {
	q := api.Fill(api.PathJobOutput, id) + fmt.Sprintf("?out=%d&err=%d&wait=%s", outOff, errOff, wait)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
		var o api.Output
		err := cl.Do(ctx, http.MethodGet, q, nil, &o)
		cancel()
		var re *api.RemoteError
		if !errors.As(err, &re) || re.Status != http.StatusTooManyRequests {
			return o, err
		}
		time.Sleep(pause + time.Duration(rand.Int64N(int64(pause))))
	}
}

// signalRelay catches SIGINT and SIGTERM and delivers them to jobs: those
// that come before the job ids are known wait for them.
type signalRelay struct {
	sigs chan os.Signal
	ids  chan []string
}

func startRelay(cl *api.Client) *signalRelay {
	r := &signalRelay{sigs: make(chan os.Signal, 8), ids: make(chan []string, 1)}
	signal.Notify(r.sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		var ids []string
		var pending []os.Signal
		idsCh := r.ids
		for {
			select {
			case s, ok := <-r.sigs:
				if !ok {
					return
				}
				pending = append(pending, s)
			case ids = <-idsCh:
				idsCh = nil
			}
			if ids == nil {
				continue
			}
			for _, s := range pending {
				var res []api.KillResult
				_ = cl.Do(context.Background(), http.MethodPost, api.PathKill,
					api.KillRequest{IDs: ids, Signal: int(s.(syscall.Signal))}, &res)
			}
			pending = nil
		}
	}()
	return r
}

// forward starts delivering to these jobs, the signals already caught first.
func (r *signalRelay) forward(ids []string) { r.ids <- ids }

func (r *signalRelay) stop() {
	signal.Stop(r.sigs)
	close(r.sigs)
}

// follow streams jobs' output until they all end and returns their exit
// status (as an exitCode error when not 0). A lost agent is waited for, and
// the output picks up where it stopped. Signals are the caller's business
// (see signalRelay): `roam logs -f` must not end the job on Ctrl-C.
func (e *env) follow(cl *api.Client, ids []string, prefix, stdin bool) error {
	return e.followFrom(cl, ids, prefix, stdin, nil)
}

// followFrom is follow from the given stdout and stderr offsets per job.
func (e *env) followFrom(cl *api.Client, ids []string, prefix, stdin bool, from map[string][2]int64) error {
	if stdin {
		go e.pumpStdin(cl, ids[0])
	}
	wmu := &e.outMu
	var lostOnce sync.Once
	codes := make([]int, len(ids))
	var wg sync.WaitGroup
	// A sweep's jobs are followed followWidth at a time, in their order:
	// the rest's output waits at their home, none of it lost.
	width := make(chan struct{}, followWidth)
	for i, id := range ids {
		wg.Add(1)
		width <- struct{}{}
		go func(i int, id string) {
			defer wg.Done()
			defer func() { <-width }()
			out, errw := e.outputWriters(id, prefix)
			outOff, errOff := from[id][0], from[id][1]
			var lostAt time.Time
			inc := -1 // the incarnation followed; -1 until known
			for {
				o, err := getOutput(cl, id, outOff, errOff, 5*time.Second)
				if err != nil {
					var re *api.RemoteError
					if errors.As(err, &re) {
						wmu.Lock()
						fmt.Fprintf(e.errOut, "roam: %s: %v\n", id, err)
						wmu.Unlock()
						codes[i] = 255
						return
					}
					if lostAt.IsZero() {
						lostAt = time.Now()
					}
					lostOnce.Do(func() {
						wmu.Lock()
						fmt.Fprintf(e.errOut, "roam: lost the agent (%v); waiting for it to come back — or later: roam attach %s\n", err, strings.Join(ids, " "))
						wmu.Unlock()
					})
					if time.Since(lostAt) > reattachFor {
						codes[i] = 255
						return
					}
					time.Sleep(500 * time.Millisecond)
					continue
				}
				lostAt = time.Time{}
				if inc >= 0 && o.Inc > inc && o.Restart != nil {
					// Restarted from a checkpoint: its output was cut back
					// to the checkpoint's, and goes on from there.
					out.Flush()
					errw.Flush()
					wmu.Lock()
					if e.json {
						_ = e.record(jobRecord{Job: id, Kind: "restarted", Node: o.Restart.Node, At: o.Restart.CheckpointAt, Why: o.Restart.Why})
					} else {
						fmt.Fprintln(e.errOut, restartNote(id, o.Restart))
					}
					wmu.Unlock()
					inc = o.Inc
					outOff, errOff = min(outOff, o.Restart.Out), min(errOff, o.Restart.Err)
					continue
				}
				inc = o.Inc
				out.Write(o.Stdout)
				errw.Write(o.Stderr)
				outOff, errOff = o.StdoutOff, o.StderrOff
				if o.Ended {
					out.Flush()
					errw.Flush()
					e.cutNote(id, o.Cut)
					switch {
					case o.ExitCode != nil:
						codes[i] = *o.ExitCode
						if e.json {
							wmu.Lock()
							_ = e.record(jobRecord{Job: id, Kind: "exit", ExitCode: o.ExitCode})
							wmu.Unlock()
						}
					case o.State == api.StateLost:
						wmu.Lock()
						if e.json {
							_ = e.record(jobRecord{Job: id, Kind: "lost", Node: o.Node, At: o.LostAt})
						}
						fmt.Fprintf(e.errOut, "roam: %s lost: node %s was declared dead at %s; the job is not restarted (roam ps shows it; it runs again if that node comes back with it)\n",
							id, o.Node, o.LostAt.Local().Format("15:04:05"))
						wmu.Unlock()
						codes[i] = api.ExitLost
					default:
						codes[i] = 255
					}
					return
				}
			}
		}(i, id)
	}
	wg.Wait()
	for _, c := range codes {
		if c != 0 {
			return exitCode(c)
		}
	}
	return nil
}

func prefixFor(on bool, id string) string {
	if on {
		return "[" + id + "] "
	}
	return ""
}

// pumpStdin copies our stdin to a job, then closes the job's stdin. The
// job's pipe takes what it has room for; the rest is sent again once the
// job has read some, after a pause that grows while it reads nothing.
func (e *env) pumpStdin(cl *api.Client, id string) {
	path := api.Fill(api.PathJobStdin, id)
	buf := make([]byte, 64<<10)
	for {
		n, err := os.Stdin.Read(buf)
		for rest, pause := buf[:n], 10*time.Millisecond; len(rest) > 0; {
			var res api.StdinResult
			if cl.DoRaw(http.MethodPost, path, rest, &res) != nil {
				return
			}
			if res.Accepted > 0 {
				rest, pause = rest[min(res.Accepted, len(rest)):], 10*time.Millisecond
				continue
			}
			time.Sleep(pause)
			pause = min(2*pause, time.Second)
		}
		if err != nil {
			// A pending job takes its eof once it starts.
			for pause := 10 * time.Millisecond; ; pause = min(2*pause, time.Second) {
				var res api.StdinResult
				if cl.DoRaw(http.MethodPost, path+"?eof=1", nil, &res) != nil || !res.Pending {
					return
				}
				time.Sleep(pause)
			}
		}
	}
}

// outputWriters are where a job's stdout and stderr go: here as they
// are (prefixed by [id] when prefix), or, with --json, as a record a line
// on standard output.
func (e *env) outputWriters(id string, prefix bool) (out, errw *lineWriter) {
	out = &lineWriter{w: e.out, mu: &e.outMu, prefix: prefixFor(prefix, id)}
	errw = &lineWriter{w: e.errOut, mu: &e.outMu, prefix: prefixFor(prefix, id)}
	if e.json {
		out.rec = func(line []byte, partial bool) { _ = e.record(lineRecord(id, "stdout", line, partial)) }
		errw.rec = func(line []byte, partial bool) { _ = e.record(lineRecord(id, "stderr", line, partial)) }
	}
	return out, errw
}

// lineWriter writes output, prefixing each line when it has a prefix, or
// handing each line to rec (--json); a partial line then waits for its
// end (or Flush).
type lineWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	part   []byte
	// rec takes a line without its newline, with mu held.
	rec func(line []byte, partial bool)
}

func (l *lineWriter) Write(b []byte) {
	if len(b) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prefix == "" && l.rec == nil {
		l.w.Write(b)
		return
	}
	l.part = append(l.part, b...)
	var out bytes.Buffer
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		if l.rec != nil {
			l.rec(l.part[:i], false)
		} else {
			out.WriteString(l.prefix)
			out.Write(l.part[:i+1])
		}
		l.part = l.part[i+1:]
	}
	l.w.Write(out.Bytes())
}

func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.part) > 0 {
		if l.rec != nil {
			l.rec(l.part, true)
		} else {
			fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.part)
		}
		l.part = nil
	}
}

// maxWholeCmds is the most jobs one roam ps asks for by id, with their
// whole command lines (control.MaxPSFull).
const maxWholeCmds = 64

func (e *env) psCmd() *cobra.Command {
	var all, long bool
	var state, user, node string
	c := &cobra.Command{
		Use:   "ps [-a] [-l] [--json] [--state STATE] [--user USER] [--on NODE] [JOBID|SWEEP...]",
		Short: "your jobs on every node (-a: everyone's, for root)",
		Long: `Lists your jobs on every node (everyone's with -a, for root), or the
jobs named; --state, --user and --on keep those in that state (pending,
running, stopped, finished, lost), of that user (a name or uid) or on that
node. A sweep named (SWEEP, or SWEEP:RANGES for some of its indices) lists
its jobs under a line that says how its indices stand: ok, failed by exit
status, lost, and those not ended. A job named that is not listed is said
on standard error, and roam ps then exits 1.

An ended job's CPU-S is its CPU seconds on every node it ran on, as its
cgroups counted them; -l adds its peak memory, its elapsed time and the
nodes it ran on (sacct's columns; --json has them for scripts).

A list cuts each job's command line to its first KiB (cmd_cut in --json);
the jobs named by id (up to 64) are listed with the whole of theirs.`,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			cl, err := e.client()
			if err != nil {
				return err
			}
			args, sweeps, err := expandRefs(cl, args)
			if err != nil {
				return err
			}
			v := url.Values{}
			if all {
				v.Set("all", "1")
			}
			// The jobs named are listed with their whole command lines
			// (a list cuts each to its first KiB), as many as one ps may.
			if len(args) <= maxWholeCmds {
				for _, id := range args {
					v.Add("id", id)
				}
			}
			q := api.PathPS
			if len(v) > 0 {
				q += "?" + v.Encode()
			}
			var js []api.Job
			if err := cl.Get(q, &js); err != nil {
				return err
			}
			js, missing, err := filterJobs(js, args, state, user, node)
			if err != nil {
				return err
			}
			for _, id := range missing {
				fmt.Fprintf(e.errOut, "roam: job %s: not found\n", id)
			}
			defer func() {
				if len(missing) > 0 && err == nil {
					err = exitCode(1)
				}
			}()
			if e.json {
				return e.printJSON(js)
			}
			for _, s := range sweeps {
				fmt.Fprintln(e.out, sweepHeader(s))
			}
			return e.psTable(js, long)
		},
	}
	c.Flags().BoolVarP(&all, "all", "a", false, "every user's jobs (root)")
	c.Flags().BoolVarP(&long, "long", "l", false, "more columns")
	c.Flags().StringVar(&state, "state", "", "only jobs in this state (pending, running, stopped, finished, lost)")
	c.Flags().StringVar(&user, "user", "", "only this user's jobs (a name or uid)")
	c.Flags().StringVar(&node, "on", "", "only the jobs on this node (--node is the agent to ask)")
	c.ValidArgsFunction = e.completeJobs()
	_ = c.RegisterFlagCompletionFunc("on", e.completeNodeFlag)
	_ = c.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{api.StatePending, api.StateRunning, api.StateStopped, api.StateFinished, api.StateLost}, never))
	return jsonVia(jsonValue, c)
}

// filterJobs keeps the jobs named in ids (all when none is) that match
// the state, user and node given ("" matches any); missing are the ids
// no job listed has.
func filterJobs(js []api.Job, ids []string, state, user, node string) (kept []api.Job, missing []string, err error) {
	switch state {
	case "", api.StatePending, api.StateRunning, api.StateStopped, api.StateFinished, api.StateLost:
	default:
		return nil, nil, fmt.Errorf("--state: %q is not a state (pending, running, stopped, finished, lost)", state)
	}
	uid := -1
	if user != "" {
		u, err := lookupUID(user)
		if err != nil {
			return nil, nil, err
		}
		uid = int(u)
	}
	named := map[string]bool{}
	for _, id := range ids {
		named[id] = false
	}
	for _, j := range js {
		if _, ok := named[j.ID]; len(ids) > 0 && !ok {
			continue
		}
		named[j.ID] = true
		if (state == "" || j.State == state) && (uid < 0 || int(j.UID) == uid) && (node == "" || j.Node == node) {
			kept = append(kept, j)
		}
	}
	for _, id := range ids {
		if !named[id] {
			missing = append(missing, id)
		}
	}
	return kept, missing, nil
}

// ckptText says how a job is checkpointed and restarted: its interval,
// its newest checkpoint kept and where, its restarts.
func ckptText(j api.Job) string {
	var parts []string
	if j.CheckpointEvery > 0 {
		parts = append(parts, "every "+j.CheckpointEvery.String())
	}
	for i := len(j.Checkpoints) - 1; i >= 0; i-- {
		c := j.Checkpoints[i]
		if c.OK && c.StoredOn != "" {
			parts = append(parts, fmt.Sprintf("last %s on %s (froze %.0f ms)", c.At.Local().Format(time.TimeOnly), c.StoredOn, c.FreezeMS))
			break
		}
	}
	if n := len(j.Restarts); n > 0 {
		r := j.Restarts[n-1]
		parts = append(parts, fmt.Sprintf("restarted %d× (last from %s, stdout cut at %d)", n, r.CheckpointAt.Local().Format(time.TimeOnly), r.Out))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// requestText is a job's requests as roam run takes them ("--cpus 0.5
// --mem 64M"), "-" when it has none.
func requestText(j api.Job) string {
	r := resources.Request{MilliCPUs: int64(math.Round(j.CPUs * resources.MilliPerCPU)), MemBytes: j.MemBytes}
	if s := r.String(); s != "" {
		return s
	}
	return "-"
}

// pinText says whether and why a job stays where it is.
func pinText(j api.Job) string {
	switch {
	case j.Pin:
		return "pinned (run --pin)"
	case j.PinReason != "":
		return "pinned: " + j.PinReason
	case j.Manual:
		return "manual (roam migrate ID auto releases it)"
	}
	return "-"
}

func (e *env) migrateCmd() *cobra.Command {
	var lazy bool
	c := &cobra.Command{
		Use:   "migrate [--lazy] JOBID NODE|home|auto",
		Short: "move a running job to another node while it runs",
		Long: `Moves a running job (its whole process tree) to NODE, or to its home
node. It keeps its id, its output and its exit status. A job moved by hand
stays where it was put until 'roam migrate JOBID auto'.

--lazy restores it on NODE first and fetches its memory afterwards (post-copy):
a short freeze whatever its size, but until the last page has arrived the job
needs both nodes.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var m api.Migration
			if err := cl.Do(context.Background(), http.MethodPost, api.PathMigrate, api.MigrateRequest{ID: args[0], Node: args[1], Lazy: lazy}, &m); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(struct {
					ID   string `json:"id"`
					Node string `json:"node"` // as asked: a node, home or auto
					api.Migration
				}{args[0], args[1], m})
			}
			if args[1] == "auto" {
				fmt.Fprintf(e.out, "%s: back under the automatic policies\n", args[0])
				return nil
			}
			fmt.Fprintf(e.out, "%s: %s -> %s, %.1f MiB, freeze %.0f ms, total %.0f ms", args[0], m.From, m.To,
				float64(m.Bytes)/(1<<20), m.FreezeMS, m.TotalMS)
			if m.Lazy {
				fmt.Fprintf(e.out, ", post-copy window %.0f ms", m.WindowMS)
			}
			fmt.Fprintln(e.out)
			return nil
		},
	}
	c.Flags().BoolVar(&lazy, "lazy", false, "post-copy: restore first, move memory on demand and in the background")
	jobs, nodes := e.completeJobs(liveJobs...), e.completeNodes(1, "home", "auto")
	c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return jobs(cmd, args, toComplete)
		}
		return nodes(cmd, args, toComplete)
	}
	return jsonVia(jsonValue, c)
}

// The real-time signals as glibc numbers them (kill -l): RTMIN is 34,
// glibc keeping 32 and 33 for itself, and RTMAX the kernel's last, 64.
const (
	sigRTMin = 34
	sigRTMax = 64
)

// signalAliases are names the kernel's table (unix.SignalNum) lacks.
var signalAliases = map[string]int{"IOT": int(syscall.SIGABRT), "POLL": int(syscall.SIGIO), "CLD": int(syscall.SIGCHLD)}

// parseSignal reads a signal as kill(1) does: a number 1 to 64, or a name
// with or without SIG, in any case (PIPE, sigusr1, RTMIN+3, RTMAX-1).
func parseSignal(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= 64 {
		return n, nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if n := int(unix.SignalNum("SIG" + name)); n > 0 {
		return n, nil
	}
	if n, ok := signalAliases[name]; ok {
		return n, nil
	}
	for base, at := range map[string]int{"RTMIN": sigRTMin, "RTMAX": sigRTMax} {
		rest, ok := strings.CutPrefix(name, base)
		if !ok {
			continue
		}
		off := 0
		if rest != "" {
			var err error
			if off, err = strconv.Atoi(rest); err != nil || (base == "RTMIN" && rest[0] != '+') || (base == "RTMAX" && rest[0] != '-') {
				break
			}
		}
		if n := at + off; n >= sigRTMin && n <= sigRTMax {
			return n, nil
		}
	}
	return 0, fmt.Errorf("-s: %q is not a signal (a number 1 to 64, or a name as kill -l prints it: TERM, PIPE, USR1, RTMIN+3, ...)", s)
}

func (e *env) killCmd() *cobra.Command {
	var sigName string
	c := &cobra.Command{
		Use:   "kill [-s SIGNAL] JOBID|SWEEP...",
		Short: "send a signal to jobs wherever they run, or to a sweep's (SWEEP, SWEEP:RANGES)",
		Long: `Sends a signal to jobs wherever they run. A sweep named (SWEEP, or
SWEEP:RANGES for some of its indices) is its jobs: those pending end before
they start, with 128+SIGNAL, when the signal ends a program by default
(TERM, INT, KILL, HUP, USR1, ...); STOP, CONT and the like reach only those
running. Its jobs that ended are passed over.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sig, err := parseSignal(sigName)
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			var res []api.KillResult
			if err := cl.Do(context.Background(), http.MethodPost, api.PathKill, api.KillRequest{IDs: args, Signal: sig}, &res); err != nil {
				return err
			}
			if e.json {
				if err := e.printJSON(res); err != nil {
					return err
				}
			}
			failed := 0
			for _, r := range res {
				if r.Error != "" {
					fmt.Fprintf(e.errOut, "roam: %s\n", r.Error)
					failed++
				}
			}
			if failed > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&sigName, "signal", "s", "TERM", "signal name or number")
	c.ValidArgsFunction = e.completeJobs(liveJobs...)
	_ = c.RegisterFlagCompletionFunc("signal", completeSignal)
	return jsonVia(jsonValue, c)
}

func (e *env) purgeCmd() *cobra.Command {
	var who string
	var all bool
	c := &cobra.Command{
		Use:   "purge [--user USER | --all]",
		Short: "remove your ended jobs and their output now",
		Long: `Removes every ended job (finished or lost) of yours, with its output, at
every node that is its home; running jobs are not touched. Ended jobs are
also removed on their own after limits.keep_finished (7 days by default).
Root may name another user, or purge every user's ended jobs with --all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.PurgeRequest{All: all}
			if who != "" {
				if all {
					return fmt.Errorf("--user and --all: give one")
				}
				uid, err := lookupUID(who)
				if err != nil {
					return err
				}
				req.UID = &uid
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			var res api.PurgeResult
			if err := cl.Do(context.Background(), http.MethodPost, api.PathPurge, req, &res); err != nil {
				return err
			}
			return e.result(res, func() error {
				_, err := fmt.Fprintf(e.out, "removed %d ended jobs\n", res.Removed)
				return err
			})
		},
	}
	c.Flags().StringVar(&who, "user", "", "another user's jobs, by name or uid (root)")
	c.Flags().BoolVar(&all, "all", false, "every user's ended jobs (root)")
	return jsonVia(jsonValue, c)
}

// lookupUID is a user name's or number's uid.
func lookupUID(who string) (uint32, error) {
	if n, err := strconv.ParseUint(who, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(who)
	if err != nil {
		return 0, fmt.Errorf("--user %s: no such user", who)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("--user %s: uid %q", who, u.Uid)
	}
	return uint32(n), nil
}
