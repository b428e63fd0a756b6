package cli

// Sweeps in the CLI (package sweep): roam run's --args-from, read here
// as the user; the references SWEEP and SWEEP:RANGES that roam ps, logs
// and attach take, turned into the sweep's job ids by its view at the
// agent (which checks the caller is its owner or root); and the end
// summary of an attached sweep.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"roam/internal/api"
	"roam/internal/sweep"
)

// maxArgsFile bounds --args-from's file: its lines travel in the run's
// request, whose body the agent reads up to 8 MiB (httpx.MaxBody), the
// environment with them.
const maxArgsFile = 8 << 20

// readArgsFrom reads --args-from FILE as the user running roam: one
// argument a line, the newline not part of it ("\r\n" as "\n"); each
// error names the file, and the line when it is one line's.
func readArgsFrom(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--args-from: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("--args-from %s: not a file", file)
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxArgsFile+1))
	sc.Buffer(make([]byte, 64<<10), sweep.MaxLine+2)
	var lines []string
	size := 0
	for sc.Scan() {
		l := strings.TrimSuffix(sc.Text(), "\r")
		size += len(sc.Bytes()) + 1
		if size > maxArgsFile {
			return nil, fmt.Errorf("--args-from %s: more than %d MiB", file, maxArgsFile>>20)
		}
		lines = append(lines, l)
		if len(lines) > sweep.MaxLines {
			return nil, fmt.Errorf("--args-from %s: more than %d lines", file, sweep.MaxLines)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("--args-from %s: line %d is longer than %d bytes", file, len(lines)+1, sweep.MaxLine)
	} else if err != nil {
		return nil, fmt.Errorf("--args-from %s: %w", file, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("--args-from %s: no line", file)
	}
	return lines, sweep.CheckLines("--args-from "+file, lines)
}

// sweepArgs are the sweep references among args, in order.
func sweepArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if sweep.IsRef(a) {
			out = append(out, a)
		}
	}
	return out
}

// getSweep is a sweep's view, of the indices ref names.
func getSweep(cl *api.Client, ref string) (api.Sweep, error) {
	var s api.Sweep
	return s, cl.Get(api.Fill(api.PathSweep, ref), &s)
}

// expandRefs turns the sweep references among args into their jobs' ids
// (by index), keeping job ids as they are; sweeps are the views read.
func expandRefs(cl *api.Client, args []string) (ids []string, sweeps []api.Sweep, err error) {
	for _, a := range args {
		if !sweep.IsRef(a) {
			ids = append(ids, a)
			continue
		}
		if _, err := sweep.ParseRef(a); err != nil {
			return nil, nil, err
		}
		s, err := getSweep(cl, a)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a, err)
		}
		for _, j := range s.Jobs {
			ids = append(ids, j.ID)
		}
		sweeps = append(sweeps, s)
	}
	return ids, sweeps, nil
}

// summarize prints, once a followed sweep (or some of its indices, ref)
// ended, how its indices ended, in one line on standard error (a record
// with --json): what roam ps SWEEP says, and the rerun of those that
// failed or were lost.
func (e *env) summarize(cl *api.Client, ref string) {
	s, err := getSweep(cl, ref)
	if err != nil {
		fmt.Fprintf(e.errOut, "roam: sweep %s: no summary: %v\n", ref, err)
		return
	}
	e.outMu.Lock()
	defer e.outMu.Unlock()
	if e.json {
		_ = e.record(jobRecord{Kind: "summary", Sweep: ref, Summary: s.Summary})
		return
	}
	again := ""
	if bad := append(append([]int{}, s.Failed...), s.Lost...); len(bad) > 0 {
		rerun := s.ID
		if r, err := sweep.ParseRef(ref); err == nil && r.Indices != nil {
			sort.Ints(bad)
			rerun += ":" + sweep.Ranges(bad)
		}
		again = " (roam run --rerun " + rerun + " runs them again)"
	}
	fmt.Fprintf(e.errOut, "roam: sweep %s: %s%s\n", ref, s.Summary, again)
}

// sweepHeader is the line roam ps prints above a sweep's jobs.
func sweepHeader(s api.Sweep) string {
	h := fmt.Sprintf("sweep %s of %s, -n %d", s.ID, s.User, s.Count)
	if s.MaxRunning > 0 {
		h += fmt.Sprintf(", --max-running %d", s.MaxRunning)
	}
	if s.RerunOf != "" {
		h += ", rerun of " + s.RerunOf
	}
	return h + ": " + s.Summary
}

// prepareRun completes a run request from the command line: the program,
// or --rerun without one; --args-from's lines, whose number is -n unless
// -n is given (and then must be it).
func prepareRun(req *api.RunRequest, args []string, argsFrom string, countSet bool) error {
	if req.Rerun != "" {
		if len(args) > 0 || countSet || argsFrom != "" {
			return fmt.Errorf("--rerun: it runs the sweep's own commands: give no program, -n or --args-from")
		}
		return nil
	}
	if len(args) == 0 {
		return fmt.Errorf("no program given (roam run [flags] -- PROG [ARGS...])")
	}
	req.Argv = args
	if argsFrom == "" {
		return nil
	}
	lines, err := readArgsFrom(argsFrom)
	if err != nil {
		return err
	}
	if countSet && req.Count != len(lines) {
		return fmt.Errorf("-n %d and --args-from %s's %d lines: give one job a line (or leave -n out)", req.Count, argsFrom, len(lines))
	}
	req.Count, req.Args = len(lines), lines
	return nil
}

// psTable prints roam ps's rows; long adds the columns of -l.
func (e *env) psTable(js []api.Job, long bool) error {
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	head := "ID\tUSER\tHOME\tNODE\tSTATE\tCPU-S\tRSS-MB\tMIG\tAGE\t"
	if long {
		head += "EXIT\tREQUEST\tPEAK-MB\tELAPSED\tRAN-ON\tSWEEP\tPIN\tCHECKPOINT\tFILES\t"
	}
	fmt.Fprintln(tw, head+"CMD")
	for _, j := range js {
		state := j.State
		switch {
		case j.State == api.StateLost && !j.LostAt.IsZero():
			state += " " + j.LostAt.Local().Format("15:04:05")
		case j.State == api.StatePending && j.PendingWhy != "":
			state += " (" + j.PendingWhy + ")"
		}
		node, rss := j.Node, fmt.Sprintf("%.1f", j.RSSMB)
		if node == "" {
			node = "-"
		}
		if j.Ended.IsZero() && j.State == api.StateFinished || !j.Ended.IsZero() {
			rss = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%d\t%s\t", shown(j.ID), shown(j.User), shown(j.Home), shown(node), shown(state),
			j.CPUSeconds, rss, j.Migrations, (time.Duration(j.AgeSeconds) * time.Second).String())
		if long {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", shown(exitText(j)), shown(requestText(j)), usedText(j), elapsedText(j), shown(dash(strings.Join(j.Nodes, ","))),
				shown(sweepText(j)), shown(pinText(j)), shown(ckptText(j)), shown(filesText(j)))
		}
		fmt.Fprintln(tw, shown(j.Cmd))
	}
	return tw.Flush()
}

// dash is s, or "-" for none.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// exitText is an ended job's exit status, and why roam ended it.
func exitText(j api.Job) string {
	ex := "-"
	if j.ExitCode != nil {
		ex = strconv.Itoa(*j.ExitCode)
	}
	if j.EndReason != "" {
		ex += " (" + j.EndReason + ")"
	}
	if j.OutputCut != "" {
		ex += " (output incomplete: " + j.OutputCut + ")"
	}
	return ex
}

// usedText is an ended job's peak memory.
func usedText(j api.Job) string {
	if j.PeakMB == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", j.PeakMB)
}

// elapsedText is an ended job's time from its start to its end.
func elapsedText(j api.Job) string {
	if j.Ended.IsZero() {
		return "-"
	}
	return (time.Duration(j.ElapsedSeconds*10) * time.Second / 10).String()
}

// sweepText is a job's sweep and index: n1:14[3].
func sweepText(j api.Job) string {
	if j.Sweep == "" || j.Index == nil {
		return "-"
	}
	return fmt.Sprintf("%s[%d]", j.Sweep, *j.Index)
}

// filesText is where a job's output is written, or why it is not.
func filesText(j api.Job) string {
	var parts []string
	if j.OutputFile != "" {
		parts = append(parts, "out "+j.OutputFile)
	}
	if j.ErrorFile != "" {
		parts = append(parts, "err "+j.ErrorFile)
	}
	if j.FileError != "" {
		parts = append(parts, "not written: "+j.FileError)
	}
	return dash(strings.Join(parts, "; "))
}
