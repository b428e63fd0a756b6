package sweep

import (
	"slices"
	"strings"
	"testing"
)

func TestRefs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		idx  []int
		err  string
	}{
		{in: "n1:14", want: "n1:14"},
		{in: "e2e-1.n2:7:3-5,9", want: "e2e-1.n2:7", idx: []int{3, 4, 5, 9}},
		{in: "n1:14[0,2-3,2]", want: "n1:14", idx: []int{0, 2, 3}},
		{in: "n1.14", err: "not a sweep id"},
		{in: "n1:x", err: "not a sweep id"},
		{in: "n1:14:", err: "no index"},
		{in: "n1:14[]", err: "no index"},
		{in: "n1:14[3", err: "ends with ]"},
		{in: "n1:14:5-3", err: "backwards"},
		{in: "n1:14:-3", err: "not an index"},
		{in: "n1:14:0-99999999", err: "more than"},
		{in: ":14", err: "not a sweep id"},
	} {
		r, err := ParseRef(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRef(%q) = %v, %v; want an error with %q", c.in, r, err, c.err)
			}
			continue
		}
		if err != nil || r.Sweep != c.want || !slices.Equal(r.Indices, c.idx) {
			t.Errorf("ParseRef(%q) = %+v, %v; want %s %v", c.in, r, err, c.want, c.idx)
		}
	}
	if got := (Ref{Sweep: "n1:3", Indices: []int{0, 1, 2, 5, 7, 8}}).String(); got != "n1:3:0-2,5,7-8" {
		t.Errorf("String = %q", got)
	}
}

func TestSubst(t *testing.T) {
	for _, c := range []struct {
		argv []string
		line string
		want []string
	}{
		{[]string{"./sim", "--in", "{}"}, "a b", []string{"./sim", "--in", "a b"}},
		{[]string{"./sim", "--in={}.dat", "{}"}, "x", []string{"./sim", "--in=x.dat", "x"}},
		{[]string{"./sim"}, "a 'b' $c", []string{"./sim", "a 'b' $c"}},
		{[]string{"echo", "{{}}", "{}"}, "v", []string{"echo", "{}", "v"}},
		{[]string{"echo", "{{}}"}, "v", []string{"echo", "{}", "v"}},
		{[]string{"./sim", "-s", "{2}", "{1}.out"}, " 0.5\t64 256 ", []string{"./sim", "-s", "64", "0.5.out"}},
		{[]string{"./sim", "{3}"}, "a b", []string{"./sim", ""}},
		{[]string{"./sim", "{1}{}"}, "{} x", []string{"./sim", "{}{} x"}},
		{[]string{"./sim", "{0}", "{01}", "{1000}", "{x}", "{-1}", "{+1}", "{ 1}", "{1", "{"}, "v", []string{"./sim", "{0}", "{01}", "{1000}", "{x}", "{-1}", "{+1}", "{ 1}", "{1", "{", "v"}},
		{[]string{"sh", "-c", "echo ${1} $1{1}", "{2}"}, "a b", []string{"sh", "-c", "echo ${1} $1a", "b"}},
	} {
		if got := Subst(c.argv, c.line); !slices.Equal(got, c.want) {
			t.Errorf("Subst(%q, %q) = %q, want %q", c.argv, c.line, got, c.want)
		}
	}
}

func TestFields(t *testing.T) {
	lines := []string{"1.5 64 256", "2 32"}
	if err := CheckFields("--args-from f", []string{"sim", "{2}"}, lines); err != nil {
		t.Errorf("{2} of lines of 3 and 2 fields: %v", err)
	}
	err := CheckFields("--args-from f", []string{"sim", "{1}", "x{3}"}, lines)
	if err == nil || err.Error() != "--args-from f: line 2 has 2 fields; the command's {3} names field 3" {
		t.Errorf("{3} of a line of 2 fields: %v", err)
	}
	if err := CheckFields("--args-from f", []string{"sim", "{}", "{{}}"}, []string{""}); err != nil {
		t.Errorf("no field named: %v", err)
	}
	if got, err := Field("{3}M", lines[0]); got != "256M" || err != nil {
		t.Errorf("Field({3}M) = %q, %v", got, err)
	}
	if _, err := Field("{3}M", lines[1]); err == nil || err.Error() != "{3}: the line has 2 fields" {
		t.Errorf("Field({3}M) of 2 fields: %v", err)
	}
	if err := CheckFields("--args-from f", []string{"sh", "-c", "echo ${3} {-3} {+3}"}, lines); err != nil {
		t.Errorf("${3}, {-3} and {+3} name no field: %v", err)
	}
	for s, want := range map[string]bool{"64M": false, "{1}M": true, "{}": true, "{0}": false, "{": false, "{{}}": false, "${1}": false, "{-1}": false} {
		if HasRef(s) != want {
			t.Errorf("HasRef(%q) = %v", s, !want)
		}
	}
}

// Longest finds the line whose command is longest as Subst would make
// it, each {N} counted as often as it comes.
func TestLongest(t *testing.T) {
	lines := []string{"x " + strings.Repeat("y", 50), strings.Repeat("a", 20) + " b", "c d"}
	for _, argv := range [][]string{{"sim"}, {"sim", "{}"}, {"sim", "{1}", "{1}", "{1}", "{1}"}, {"sim", "{2}"}, {"sim", "${1}{1}", "{{}}"}} {
		want, most := 0, -1
		for i, l := range lines {
			n := 0
			for _, a := range Subst(argv, l) {
				n += len(a)
			}
			if n > most {
				want, most = i, n
			}
		}
		if got := Longest(argv, lines); got != want {
			t.Errorf("Longest(%q) = line %d, Subst's longest is line %d", argv, got, want)
		}
	}
	if Longest([]string{"sim", "{1}", "{1}", "{1}"}, lines) != 1 || Longest([]string{"sim", "{}"}, lines) != 0 {
		t.Error("{1} thrice: line 1 (20-byte first word); {}: line 0 (the longest line)")
	}
}

func TestPatterns(t *testing.T) {
	v := Values{Sweep: "n1:4", Job: "n1.9", Index: 3}
	if got := Expand("out/%A_%a.%j.%%", "/home/u", v); got != "/home/u/out/n1:4_3.n1.9.%" {
		t.Errorf("Expand = %q", got)
	}
	if got := Expand("/abs/x-%a", "/home/u", v); got != "/abs/x-3" {
		t.Errorf("Expand = %q", got)
	}
	for _, c := range []struct {
		p     string
		count int
		err   string
	}{
		{"o-%a", 5, ""}, {"o-%j", 5, ""}, {"o", 1, ""}, {"", 9, ""},
		{"o-%A", 5, "one file for all 5"}, {"o-%x", 1, "%x"}, {"o-%", 1, "lone"}, {"d-%a/", 2, "directory"},
	} {
		err := CheckPattern("--output", c.p, c.count)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CheckPattern(%q, %d) = %v, want %q", c.p, c.count, err, c.err)
		}
	}
}

func TestCheckLines(t *testing.T) {
	if err := CheckLines("--args-from f", []string{"a", "b\x00c"}); err == nil || !strings.Contains(err.Error(), "--args-from f: line 2") {
		t.Errorf("NUL: %v", err)
	}
	if err := CheckLines("--args-from f", []string{strings.Repeat("x", MaxLine+1)}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("long: %v", err)
	}
}

func TestRelease(t *testing.T) {
	for _, c := range []struct {
		s    State
		want []int
	}{
		{State{Pending: []int{4, 2, 3}}, []int{2, 3, 4}},
		{State{MaxRunning: 2, Running: 1, Pending: []int{9, 5, 7}}, []int{5}},
		{State{MaxRunning: 2, Running: 2, Pending: []int{5}}, nil},
		{State{MaxRunning: 2, Running: 3, Pending: []int{5}}, nil},
		{State{MaxRunning: 5, Pending: []int{1, 0, 2}}, []int{0, 1, 2}},
	} {
		if got := Release(c.s); !slices.Equal(got, c.want) {
			t.Errorf("Release(%+v) = %v, want %v", c.s, got, c.want)
		}
	}
}

func TestSummary(t *testing.T) {
	code := func(c int) *int { return &c }
	s := Summarize([]Member{
		{Index: 3, State: Finished, Exit: code(1)}, {Index: 0, State: Finished, Exit: code(0)},
		{Index: 1, State: Finished, Exit: code(1)}, {Index: 2, State: Lost}, {Index: 4, State: Finished, Exit: code(143)},
		{Index: 5, State: Pending}, {Index: 6, State: Running},
	})
	if want := "7 jobs: 1 ok, 3 failed (exit 1: 1,3; exit 143: 4), 1 lost (2), 1 running, 1 pending"; s.String() != want {
		t.Errorf("summary %q, want %q", s, want)
	}
	if s.Ended() || !slices.Equal(s.Again(), []int{1, 2, 3, 4}) {
		t.Errorf("Ended %v Again %v", s.Ended(), s.Again())
	}
}
