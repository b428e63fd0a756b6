package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"roam/internal/api"
	"roam/internal/sweep"
)

// --args-from FILE: one argument a line (a "\r\n" end taken as "\n", an
// empty line an empty argument), -n its number unless given; each bad
// file refused with one error naming the file, and the line when it is
// one line's.
func TestArgsFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "a b\r\n\n'c' $d\n")
	req := api.RunRequest{Count: 1}
	if err := prepareRun(&req, []string{"./sim", "{}"}, good, false); err != nil || req.Count != 3 || !slices.Equal(req.Args, []string{"a b", "", "'c' $d"}) {
		t.Fatalf("good file: %v, -n %d, %q", err, req.Count, req.Args)
	}
	for _, c := range []struct {
		file     string
		count    int
		countSet bool
		want     string
	}{
		{write("nul", "a\nb\x00c\n"), 1, false, "nul: line 2 holds a NUL"},
		{write("long", "a\nb\n"+strings.Repeat("x", sweep.MaxLine+1)+"\n"), 1, false, "long: line 3 is 65537 bytes"},
		{write("empty", ""), 1, false, "empty: no line"},
		{filepath.Join(dir, "none"), 1, false, "--args-from: open " + filepath.Join(dir, "none")},
		{dir, 1, false, "not a file"},
		{good, 5, true, "-n 5 and --args-from " + good + "'s 3 lines"},
	} {
		req := api.RunRequest{Count: c.count}
		err := prepareRun(&req, []string{"./sim"}, c.file, c.countSet)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line with %q", c.file, err, c.want)
		}
	}
	if err := prepareRun(&api.RunRequest{SweepRequest: api.SweepRequest{Rerun: "1:3"}}, []string{"./sim"}, "", false); err == nil || !strings.Contains(err.Error(), "--rerun") {
		t.Errorf("--rerun with a program: %v", err)
	}
	if err := prepareRun(&api.RunRequest{Count: 1}, nil, "", false); err == nil || !strings.Contains(err.Error(), "no program") {
		t.Errorf("no program: %v", err)
	}
}

// --mem {N}: each index's request from its line's N-th word; each bad
// line refused with one error naming the line, and nothing sent.
func TestMemFromEachLine(t *testing.T) {
	req := api.RunRequest{Count: 3, SweepRequest: api.SweepRequest{Args: []string{"1.5 32", "2 256", "0.2 2G"}}}
	if err := parseRequest(&req, "", "{2}M"); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf(`"2G" + "M": %v; want line 3 refused`, err)
	}
	req.Args[2] = "0.2 64"
	if err := parseRequest(&req, "", "{2}M"); err != nil || !slices.Equal(req.Mems, []int64{32 << 20, 256 << 20, 64 << 20}) || req.MemBytes != 0 {
		t.Fatalf("--mem {2}M: %v, mems %v, mem_bytes %d", err, req.Mems, req.MemBytes)
	}
	for _, c := range []struct {
		args []string
		mem  string
		want string
	}{
		{[]string{"1 64", "2"}, "{2}M", "--mem {2}M: --args-from line 2: {2}: the line has 1 fields"},
		{[]string{"1 64", "2 x"}, "{2}M", `--args-from line 2: --mem "xM" is not a size`},
		{[]string{"1 4"}, "{2}M", "--args-from line 1: --mem 4M is out of range"},
		{nil, "{2}M", "--mem {2}M: {N} is a field of each --args-from line; give --args-from FILE"},
	} {
		req := api.RunRequest{Count: max(len(c.args), 1), SweepRequest: api.SweepRequest{Args: c.args}}
		err := parseRequest(&req, "", c.mem)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q with --mem %s: %v; want one line starting %q", c.args, c.mem, err, c.want)
		}
	}
}
