package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/api"
)

func (e *env) webCmd() *cobra.Command {
	return jsonVia(jsonValue, &cobra.Command{
		Use:   "web",
		Short: "print the address of the node's live web view, with a token for you",
		Long: `Prints the address of the asked node's live web view (roamd's
metrics_addr), with a token minted for you: the page shows every node's
load and memory, your jobs by name and other users' as counts, and
migrations and placements as they happen (root's token shows everything).
The token is in the address's #fragment, which the browser does not send
to the server with the page (the page then sends it with its event
stream); it expires after 12 hours. Anyone holding the address sees what
you see there: keep it to yourself, and paste it into a running browser
rather than start one with it on its command line, which other users can
read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var t api.WebToken
			if err := cl.Do(ctx, http.MethodPost, api.PathWebToken, nil, &t); err != nil {
				return err
			}
			if cleartext(t.URL) {
				fmt.Fprintln(e.errOut, "roam web: the address is plain http to another host: its token crosses the network in clear (metrics_web_config turns TLS on)")
			}
			return e.result(t, func() error {
				_, err := fmt.Fprintln(e.out, t.URL)
				return err
			})
		},
	})
}

// cleartext says whether a page's address is plain http to a host other
// than this one's loopback.
func cleartext(addr string) bool {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())
}
