package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roam/internal/docgen"
)

// roam run --help and its man page carry the same EXIT STATUS and
// ENVIRONMENT tables, row by row (exitStatuses, jobEnvironment), the man
// page's as sections of their own before OPTIONS; roam --help and roam(1)
// carry the other commands' statuses.
func TestHelpAndManPageCarryTheTables(t *testing.T) {
	dir := t.TempDir()
	if err := docgen.Write((&env{}).rootCmd(), "1", dir); err != nil {
		t.Fatal(err)
	}
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	unroff := strings.NewReplacer(`\-`, "-", `\e`, `\`, `\&`, "")
	for _, tc := range []struct {
		args []string
		page string
		want map[string][][2]string
	}{
		{[]string{"run", "--help"}, "roam-run.1", map[string][][2]string{"EXIT STATUS": exitStatuses, "ENVIRONMENT": jobEnvironment}},
		{[]string{"--help"}, "roam.1", map[string][][2]string{"EXIT STATUS": otherExitStatuses}},
	} {
		var help bytes.Buffer
		if code := run(tc.args, &help, &help); code != 0 {
			t.Fatalf("roam %s: exit %d", strings.Join(tc.args, " "), code)
		}
		b, err := os.ReadFile(filepath.Join(dir, "man", "man1", tc.page))
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		for title, rows := range tc.want {
			sec := strings.Index(page, ".SH "+title+"\n")
			if sec < 0 || sec > strings.Index(page, ".SH OPTIONS") {
				t.Errorf("%s: no section %s before OPTIONS", tc.page, title)
				continue
			}
			body := page[sec:]
			body = body[:strings.Index(body[1:], ".SH ")+1]
			if !strings.Contains(help.String(), "\n"+title+"\n") {
				t.Errorf("roam %s: no %s", strings.Join(tc.args, " "), title)
			}
			for _, r := range rows {
				if !strings.Contains(flat(help.String()), flat(r[0]+" "+r[1])) {
					t.Errorf("roam %s: %s lacks row %q %q", strings.Join(tc.args, " "), title, r[0], r[1])
				}
				if !strings.Contains(unroff.Replace(body), ".TP\n.B "+r[0]+"\n"+r[1]+"\n") {
					t.Errorf("%s: %s lacks row %q %q", tc.page, title, r[0], r[1])
				}
			}
		}
	}
}
