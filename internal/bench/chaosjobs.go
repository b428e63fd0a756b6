package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
)

// chaosJob is a job of the chaos run: its record at the last check, and
// the file it appends to.
type chaosJob struct {
	id   string
	seq  int
	home string
	file string
	rec  api.Job
	// over: it finished and its file was checked whole.
	over bool
	// owner is the newest checkpoint file of it the run took as its
	// user (nil: none); points are the restart points of the run's roam
	// restarts of it, in turn; ownerNext is when its owner may try a
	// refused restart again.
	owner     *ownerFile
	points    []RestartPoint
	ownerNext time.Time
}

// chaosScript is a job of the chaos run: it counts to LINES, keeps the
// sum of the numbers so far beside the count and checks one against the
// other every round (a restore that lost or mixed its memory fails it,
// exit 3), and appends each number to FILE in one write, so that the file
// shows every copy that ran: one copy counts up by one; a restart from a
// checkpoint falls back once to the checkpoint's number; two copies
// interleave.
const chaosScript = `n=0; s=0; while [ $n -lt %d ]; do n=$((n+1)); s=$((s+n)); ` +
	`if [ $s -ne $((n*(n+1)/2)) ]; then echo "state lost at $n: sum $s" >&2; exit 3; fi; ` +
	`echo $n >> %s; sleep 0.1; done`

// topUp starts jobs until Jobs run, each from a node drawn at random (its
// home), every other one with periodic checkpoints (a long cut of its
// node restarts it elsewhere). A start refused (a node's disk at its
// reserve, say) is tried again at the next step.
func (x *chaos) topUp() error {
	active := 0
	for _, j := range x.jobs {
		if !j.over {
			active++
		}
	}
	for ; active < x.spec.Jobs; active++ {
		seq := len(x.jobs) + 1
		home := x.rng.IntN(len(x.st.Nodes))
		file := filepath.Join(x.dir, fmt.Sprintf("job%d", seq))
		req := api.RunRequest{Argv: []string{"sh", "-c", fmt.Sprintf(chaosScript, x.spec.Lines, file)}, Count: 1, Env: os.Environ(), Cwd: "/"}
		if seq%2 == 0 {
			req.CheckpointEvery = chaosEvery
		}
		var resp api.RunResponse
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := x.user[home].Do(ctx, http.MethodPost, api.PathRun, req, &resp)
		cancel()
		if err != nil || len(resp.IDs) != 1 {
			fmt.Fprintf(x.progress, "chaos: a job's start from node %s refused: %v\n", x.st.Nodes[home].ID, err)
			return nil
		}
		x.jobs[resp.IDs[0]] = &chaosJob{id: resp.IDs[0], seq: seq, home: x.st.Nodes[home].ID, file: file, rec: api.Job{State: api.StateStarting}}
	}
	return nil
}

// CheckLines checks a file of numbered lines that one job appended, one
// number a line, through its restarts (points: where each restart in its
// record may fall back to, in turn). One copy counts up by one from 1. A
// restart runs the job again from a checkpoint: its copy writes, first,
// the number after the one the checkpoint's copy had written, so the file
// falls back there and counts up by one again; the lines the killed copy
// wrote after the checkpoint are counted again, a rerun by design, never
// at the same time (a line that jumps up is two copies interleaving). A
// fall is matched to the first restart still unmatched that allows it;
// those before it fell nowhere (the copy was killed at its checkpoint). A
// fall no restart allows is a copy that ran unrestarted, or a restart
// from the wrong place. It returns the last number. A last line without
// its newline (a write cut by a kill) is left out.
func CheckLines(b []byte, points []RestartPoint) (last int, err error) {
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		s = ""
	}
	if s == "" {
		return 0, nil
	}
	next := 0 // the first restart not matched to a fall
	for i, l := range strings.Split(s, "\n") {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return last, fmt.Errorf("line %d is %q, not a number", i+1, l)
		}
		switch {
		case n == last+1:
		case n <= last:
			k := matchFall(points[next:], n)
			if k < 0 {
				return last, fmt.Errorf("line %d: %d after %d, where none of its restarts %v from the %d-th falls back to: a copy ran that was not restarted", i+1, n, last, points, next+1)
			}
			next += k + 1
		default:
			return last, fmt.Errorf("line %d: %d after %d: %w", i+1, n, last, ErrInterleave)
		}
		last = n
	}
	return last, nil
}

// matchFall is the index of the first of points that allows a fall to n,
// or -1.
func matchFall(points []RestartPoint, n int) int {
	for k, p := range points {
		if !p.Owner || p.Lo <= n && n <= p.Hi {
			return k
		}
	}
	return -1
}
