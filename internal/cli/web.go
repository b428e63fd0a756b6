package cli

import (
	"context"
	"fmt"
	"net/http"
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
to the server with the page; it expires after 12 hours. Anyone holding the
address sees what you see there: keep it to yourself.`,
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
			return e.result(t, func() error {
				_, err := fmt.Fprintln(e.out, t.URL)
				return err
			})
		},
	})
}
