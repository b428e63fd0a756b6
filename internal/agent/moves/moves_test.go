package moves

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"roam/internal/ckpt"
	"roam/internal/migrate"
)

// arrival is a coming migration as the tests need it.
type arrival struct {
	job   string
	ended atomic.Bool
}

func (a *arrival) Job() string { return a.job }
func (a *arrival) Ended() bool { return a.ended.Load() }

type lazy struct{ mid string }

func newTable() *Table[*arrival, *lazy] { return New[*arrival, *lazy]("n1", 1) }

// A migration id is listed once: Arrive refuses a second, Adopt returns
// the first; Ended forgets only the one listed; a job is arriving while a
// migration of it other than the one asking has not ended.
func TestArrivals(t *testing.T) {
	tb := newTable()
	a, b := &arrival{job: "n2.1"}, &arrival{job: "n2.1"}
	if err := tb.Arrive("m1", a); err != nil {
		t.Fatal(err)
	}
	if err := tb.Arrive("m1", b); err == nil {
		t.Fatal("a second migration of one id was listed")
	}
	if got, fresh := tb.Adopt("m1", b); got != a || fresh {
		t.Fatalf("Adopt of a listed id: %v %v, want the listed one", got, fresh)
	}
	if got, fresh := tb.Adopt("m2", b); got != b || !fresh {
		t.Fatalf("Adopt of a new id: %v %v", got, fresh)
	}
	if !tb.Arriving("n2.1", "m1") || !tb.Arriving("n2.1", "m2") || tb.Arriving("n2.2", "") {
		t.Fatal("Arriving")
	}
	b.ended.Store(true)
	if tb.Arriving("n2.1", "m1") {
		t.Fatal("an ended migration is arriving")
	}
	tb.Ended("m1", b) // not the one listed under m1
	if got, ok := tb.Arrival("m1"); !ok || got != a {
		t.Fatal("Ended forgot another migration of the id")
	}
	tb.Ended("m1", a)
	tb.Ended("m2", b)
	if _, ok := tb.Arrival("m1"); ok || len(tb.Arrivals()) != 0 {
		t.Fatalf("left %d arrivals", len(tb.Arrivals()))
	}
}

func TestMovedTo(t *testing.T) {
	tb := newTable()
	tb.Left("n2.1", "n3")
	if got := tb.MovedTo("n2.1"); got != "n3" {
		t.Fatalf("MovedTo %q", got)
	}
	tb.Back("n2.1")
	if got := tb.MovedTo("n2.1"); got != "" {
		t.Fatalf("MovedTo %q once back", got)
	}
}

// What the checks found is kept within MaxChecked and CheckedKeep, the
// oldest going first, never the one just kept; a late check adds to a
// kept one of its job only, within twice what one check may hold.
func TestCheckedBound(t *testing.T) {
	tb := newTable()
	files := func(n int) map[string]migrate.OpenFile {
		m := map[string]migrate.OpenFile{}
		for i := range n {
			p := fmt.Sprintf("/f%d", i)
			m[p] = migrate.OpenFile{Path: p}
		}
		return m
	}
	now := time.Unix(1e9, 0)
	per := migrate.MaxOpenFiles
	for i := range 5 { // 4 fit in MaxChecked with their own count
		if err := tb.KeepChecked(fmt.Sprint("m", i), "j", files(per-1), now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.KeepChecked("m4", "j", nil, now); err == nil {
		t.Fatal("a second check of a migration replaced the first")
	}
	if tb.TakeChecked("m0", "j") != nil {
		t.Fatal("the oldest check was kept beyond the bound")
	}
	if err := tb.AddChecked("m1", "j", files(per+1)); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddChecked("m2", "other", files(1)); err == nil {
		t.Fatal("a late check of another job was added")
	}
	if err := tb.AddChecked("m2", "j", files(per+2)); err == nil {
		t.Fatal("a late check beyond twice a check's files was added")
	}
	if got := tb.TakeChecked("m1", "j"); len(got) != per+1 {
		t.Fatalf("m1 has %d files, want %d", len(got), per+1)
	}
	if tb.TakeChecked("m2", "other") != nil || tb.TakeChecked("m2", "j") != nil {
		t.Fatal("TakeChecked of another job did not forget the check")
	}
	// Past CheckedKeep, a check goes when the next is kept.
	if err := tb.KeepChecked("m9", "j", nil, now.Add(CheckedKeep+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tb.TakeChecked("m3", "j") != nil {
		t.Fatal("a check older than CheckedKeep was kept")
	}
}

type fakeSink struct {
	conn net.Conn
	done chan struct{}
	err  error
}

func (s *fakeSink) Conn() net.Conn        { return s.conn }
func (s *fakeSink) Done() <-chan struct{} { return s.done }
func (s *fakeSink) Err() error            { return s.err }
func (s *fakeSink) Stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

// A sink's socket goes to one connection; a sink is busy while a dump is
// connected and its server runs; claimed, it is off the table.
func TestSink(t *testing.T) {
	tb := newTable()
	c1, c2 := net.Pipe()
	defer c2.Close()
	fs := &fakeSink{conn: c1, done: make(chan struct{})}
	s, err := NewSink("m1", t.TempDir()+"/in-m1", func(string) (ckpt.Sink, error) { return fs, nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.OpenSink(s); err != nil {
		t.Fatal(err)
	}
	if tb.OpenSink(s) == nil {
		t.Fatal("a second sink of one migration was listed")
	}
	if s.Busy() {
		t.Fatal("busy before a dump connected")
	}
	if tb.TakeSinkConn("m1") != c1 || tb.TakeSinkConn("m1") != nil {
		t.Fatal("the sink's socket went to other than one connection")
	}
	if !s.Busy() || tb.Serving() != 1 {
		t.Fatal("a connected sink is not busy")
	}
	fs.Stop()
	if s.Busy() || s.Wait(time.Second) != nil || s.Failure(time.Second) != "" {
		t.Fatal("an ended sink")
	}
	if tb.ClaimSink("m1") != s || tb.Sink("m1") != nil || tb.Serving() != 0 {
		t.Fatal("a claimed sink is still listed")
	}
}

func TestLazyAndPrune(t *testing.T) {
	tb := newTable()
	tb.ServeLazy("m1", &lazy{mid: "m1"})
	if l, ok := tb.Lazy("m1"); !ok || l.mid != "m1" {
		t.Fatal("Lazy")
	}
	tb.EndLazy("m1")
	if _, ok := tb.Lazy("m1"); ok {
		t.Fatal("an ended lazy dump is listed")
	}
	now := time.Unix(1e9, 0)
	if !tb.PruneDue(now, time.Minute) || tb.PruneDue(now.Add(time.Second), time.Minute) || !tb.PruneDue(now.Add(time.Minute), time.Minute) {
		t.Fatal("PruneDue")
	}
}
