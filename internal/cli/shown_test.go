package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode"

	"roam/internal/api"
)

// What users put in a job reaches other people's terminals through roam
// ps and roam events with no control character of its own: an escape
// sequence in a command line (a window title, a screen clear, a carriage
// return faking a line) is shown escaped.
func TestPSAndEventsShowNoControlCharacters(t *testing.T) {
	evil := "sim \x1b]0;owned\x07 \x1b[2J\rroot  1.1 \u009b31m \xff"
	var out bytes.Buffer
	e := &env{out: &out}
	code := 0
	j := api.Job{ID: "1.1", User: "u\x1b[7m", Home: "1", Node: "2", State: api.StateFinished, Cmd: evil,
		ExitCode: &code, EndReason: "ended \x1b[1m"}
	j.OutputFile, j.PendingWhy = "/home/u/o\x1b[0m", "x\x07"
	js := []api.Job{j}
	if err := e.psTable(js, true); err != nil {
		t.Fatal(err)
	}
	out.WriteString(formatEvent(api.Event{Kind: "place", Job: "1.1", To: "2", Why: evil}) + "\n")
	for _, r := range out.String() {
		if unicode.IsControl(r) && r != '\n' {
			t.Fatalf("a control character %U reached the terminal:\n%q", r, out.String())
		}
	}
	for _, want := range []string{`sim \x1b]0;owned\x07 \x1b[2J\x0droot  1.1 \u009b31m \xff`, `u\x1b[7m`, `ended \x1b[1m`, `o\x1b[0m`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %s:\n%s", want, out.String())
		}
	}
	if got := shown("plain sim --seed 7 é"); got != "plain sim --seed 7 é" {
		t.Errorf("shown changed clean text: %q", got)
	}
}
