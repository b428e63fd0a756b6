package agent

import (
	"net/http"

	"roam/internal/agent/peer"
	"roam/internal/api"
)

// The agent's errors and their HTTP statuses are package peer's
// (errors.go): one table for the API edge and the peer routes.

// writeError answers with err's status and message.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, peer.Status(err), api.Error{Error: err.Error()})
}
