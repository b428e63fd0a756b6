package sim

// The Standard Workload Format of the Parallel Workloads Archive: one
// job a line, 18 whitespace-separated fields, -1 for unknown, comments
// after ';'. Cleaned logs leave gaps in the job numbers. The fields
// read here: 2 submit time (s), 4 run time (s), 5 allocated processors
// (or 8 requested, when 5 is unknown), 7 used memory (KB a processor).

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"
)

// swfFields is the number of fields of an SWF line.
const swfFields = 18

// MaxSWFProcs bounds a job's processors, so that a bad line cannot make
// millions of processes.
const MaxSWFProcs = 1 << 16

// ReadSWF reads an SWF trace: its jobs in order of submission, times
// from the first. Jobs with an unknown or zero run time or processor
// count are left out (the archive's cancelled jobs); a line without 18
// numbers is an error naming it.
func ReadSWF(r io.Reader) ([]Job, error) {
	sc := bufio.NewScanner(r)
	var jobs []Job
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), ";")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != swfFields {
			return nil, fmt.Errorf("swf line %d: %d fields, not %d", line, len(f), swfFields)
		}
		var v [swfFields]float64
		for i, s := range f {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("swf line %d field %d: %q is not a number", line, i+1, s)
			}
			v[i] = x
		}
		procs := v[4]
		if procs <= 0 {
			procs = v[7]
		}
		if v[3] <= 0 || procs <= 0 || v[1] < 0 {
			continue
		}
		if procs > MaxSWFProcs {
			return nil, fmt.Errorf("swf line %d: %v processors, over %d", line, procs, MaxSWFProcs)
		}
		j := Job{Submit: time.Duration(v[1] * float64(time.Second)), Work: v[3], Procs: int(procs)}
		if v[6] > 0 {
			j.RSSMB = v[6] / 1024
		}
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("swf: %w", err)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	if len(jobs) > 0 {
		first := jobs[0].Submit
		for i := range jobs {
			jobs[i].Submit -= first
		}
	}
	return jobs, nil
}

// WriteSWF writes n jobs of workload w as an SWF trace: the fields it
// does not model are -1, and every gap-th job number is skipped (0:
// none), as in a cleaned log.
func WriteSWF(out io.Writer, w Workload, n, gap int, rng *rand.Rand) error {
	bw := bufio.NewWriter(out)
	fmt.Fprintf(bw, "; roam sim: %d synthetic jobs\n; fields: SWF version 2 (Parallel Workloads Archive), -1 unknown\n", n)
	num := 0
	for k := 0; k < n; k++ {
		j, ok := w.Next(rng)
		if !ok {
			break
		}
		num++
		if gap > 0 && num%gap == 0 {
			num++
		}
		mem := -1.0
		if j.RSSMB > 0 {
			mem = j.RSSMB * 1024
		}
		fmt.Fprintf(bw, "%d %.0f -1 %.3f %d -1 %.0f %d -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n", num, j.Submit.Seconds(), j.Work, max(j.Procs, 1), mem, max(j.Procs, 1))
	}
	return bw.Flush()
}
