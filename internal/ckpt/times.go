package ckpt

// Where the time of a CRIU call goes: starting CRIU's worker, then the
// parts CRIU times itself (its stats-dump and stats-restore images).

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/checkpoint-restore/go-criu/v7/stats"
	"google.golang.org/protobuf/proto"

	"roam/internal/api"
)

// Times are the parts of one CRIU call, in the order they ran; Side is
// left to the caller. A part CRIU's statistics do not name is one part.
type Times []api.Phase

// Sum is the time of the parts; frozen: only those the job was stopped in
// (a migration's freeze, summed over both nodes' steps).
func (t Times) Sum(frozen bool) float64 {
	var s float64
	for _, p := range t {
		if p.Frozen || !frozen {
			s += p.MS
		}
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func usMS(us uint32) float64 { return float64(us) / 1000 }

// dumpTimes splits a dump of wall time, whose worker took started to
// start: CRIU's own set-up and wind-down (the job runs, but for the
// wind-down's few frees), the seizing of the tree, the dump of its state,
// and of its memory pages (written, or sent to the page server).
func dumpTimes(dir string, started, wall time.Duration) Times {
	t := Times{{Name: "criu start", MS: ms(started)}}
	e, err := readStats(filepath.Join(dir, stats.StatsDump))
	st := e.GetDump()
	if err != nil || st == nil {
		return append(t, api.Phase{Name: "criu dump", MS: ms(wall - started), Frozen: true})
	}
	freezing, frozen, pages := usMS(st.GetFreezingTime()), usMS(st.GetFrozenTime()), usMS(st.GetMemdumpTime())
	setup := max(ms(wall-started)-freezing-frozen, 0)
	return append(t,
		api.Phase{Name: "criu setup", MS: setup},
		api.Phase{Name: "criu freeze", MS: freezing, Frozen: true},
		api.Phase{Name: "criu dump", MS: max(frozen-pages, 0), Frozen: true},
		api.Phase{Name: "criu pages", MS: pages, Frozen: true})
}

// restoreTimes splits a restore the same way: CRIU's set-up, the forking
// of the tree, the rest of the restore. (The job is stopped throughout:
// the caller marks them frozen.)
func restoreTimes(dir string, started, wall time.Duration) Times {
	t := Times{{Name: "criu start", MS: ms(started)}}
	e, err := readStats(filepath.Join(dir, stats.StatsRestore))
	st := e.GetRestore()
	if err != nil || st == nil {
		return append(t, api.Phase{Name: "criu restore", MS: ms(wall - started)})
	}
	fork, rest := usMS(st.GetForkingTime()), usMS(st.GetRestoreTime())
	return append(t,
		api.Phase{Name: "criu setup", MS: max(ms(wall-started)-rest, 0)},
		api.Phase{Name: "criu fork", MS: fork},
		api.Phase{Name: "criu restore", MS: max(rest-fork, 0)})
}

// readStats reads one of CRIU's statistics images. Not go-criu's reader:
// a restore's images directory holds what a peer sent, and that reader
// trusts the sizes it reads.
func readStats(path string) (*stats.StatsEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStats))
	if err != nil {
		return nil, err
	}
	return parseStats(b)
}

// maxStats bounds a statistics image (CRIU's are about 100 bytes).
const maxStats = 4096

func parseStats(b []byte) (*stats.StatsEntry, error) {
	if len(b) < stats.PayloadOffset ||
		binary.LittleEndian.Uint32(b[stats.PrimaryMagicOffset:]) != stats.ImgServiceMagic ||
		binary.LittleEndian.Uint32(b[stats.SecondaryMagicOffset:]) != stats.StatsMagic {
		return nil, errors.New("not a CRIU statistics image")
	}
	n := binary.LittleEndian.Uint32(b[stats.SizeOffset:])
	if uint64(n) > uint64(len(b)-stats.PayloadOffset) {
		return nil, errors.New("CRIU statistics image cut short")
	}
	st := &stats.StatsEntry{}
	if err := proto.Unmarshal(b[stats.PayloadOffset:stats.PayloadOffset+int(n)], st); err != nil {
		return nil, err
	}
	return st, nil
}
