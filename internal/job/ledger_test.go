package job

import (
	"errors"
	"testing"
)

// A sweep's Args are charged once, with its first record, and given back
// with its last; Admit refuses what would pass the budget and changes
// nothing; a lone record pays for its own arguments.
func TestLedger(t *testing.T) {
	argv := []string{"/bin/echo", string(make([]byte, 1<<20))}
	recs := sweepRecs(4, argv, []string{"HOME=/"})
	l := NewLedger()
	over := func(budget int64) func(uint32, int64, int64) error {
		return func(_ uint32, have, more int64) error {
			if have+more > budget {
				return errors.New("over")
			}
			return nil
		}
	}
	if err := l.Admit(recs, over(1<<20)); err == nil || l.User(7) != 0 {
		t.Fatalf("4 records sharing 1 MiB of argv admitted within 1 MiB: %v, %d", err, l.User(7))
	}
	if err := l.Admit(recs, over(2<<20)); err != nil {
		t.Fatalf("4 records sharing 1 MiB of argv refused within 2 MiB: %v", err)
	}
	for i := range recs {
		l.Add(&recs[i], nil)
	}
	shared := (&Args{Argv: argv, Env: recs[0].Env}).Charge()
	if got := l.User(7); got < shared || got > shared+4*(RecordOverhead+200) {
		t.Fatalf("a sweep of 4 is charged %d; its Args are %d", got, shared)
	}
	for i := range 3 {
		l.Drop(&recs[i])
	}
	if got := l.User(7); got < shared {
		t.Fatalf("the sweep's Args went before its last record: %d", got)
	}
	l.Drop(&recs[3])
	if got := l.User(7); got != 0 {
		t.Fatalf("%d bytes charged with no record", got)
	}
	lone := Record{ID: "n1.9", UID: 7, Argv: argv}
	l.Add(&lone, nil)
	if got := l.User(7); got != RecordOverhead+StringsBytes(argv) {
		t.Fatalf("a lone record is charged %d", got)
	}
}
