package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// roam run's exit status is its jobs'; when roam itself fails (here: no
// agent at the socket) it is 255, as its help says, with the reason on
// standard error. Another command failing so exits 1.
func TestRunExitsTwoFiftyFiveWhenRoamFails(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--socket", sock, "run", "--", "/bin/true"}, 255},
		{[]string{"--socket", sock, "run", "-n", "0", "--", "/bin/true"}, 255},
		{[]string{"--socket", sock, "ps"}, 1},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.code || !strings.HasPrefix(errOut.String(), "roam: ") || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("roam %s: exit %d, stderr %q; want %d and one line", strings.Join(tc.args, " "), code, errOut.String(), tc.code)
		}
	}
}
