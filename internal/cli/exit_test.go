package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// No command has a flag of the name of a global one (--cluster, --node,
// --socket): cobra would take it for both, and roam --node 1 ps would
// filter instead of asking node 1.
func TestNoFlagShadowsAGlobalOne(t *testing.T) {
	root := (&env{}).rootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if root.PersistentFlags().Lookup(f.Name) != nil {
				t.Errorf("roam %s has its own --%s, which shadows the global one", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
