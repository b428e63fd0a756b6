package agent

import (
	"errors"
	"net/http"

	"roam/internal/api"
	"roam/internal/errkind"
)

// The agent's errors. Each is made with errkind.New, so its message is
// complete for the user and it still matches its kind with errors.Is.
// ErrPinned (migrate.go) and ErrConfig (config.go) live beside the code
// that owns them and are in the table too.
var (
	ErrPermission  = errors.New("permission denied")
	ErrNotFound    = errors.New("not found")
	ErrBadRequest  = errors.New("bad request")
	ErrUnavailable = errors.New("unavailable")
	// ErrLimit: the request would pass one of the node's limits.
	ErrLimit = errors.New("over a limit")
)

// statusTable is the one table between the agent's errors and HTTP
// statuses: errorStatus reads it from error to status at the API edge,
// statusError from status back to error on a peer's answer, so a kind keeps
// its meaning across a peer call. In order: the first error a status has
// is the one it turns back into (400 is ErrBadRequest, never ErrConfig).
var statusTable = []struct {
	err    error
	status int
}{
	{ErrPermission, http.StatusForbidden},
	{ErrNotFound, http.StatusNotFound},
	{ErrBadRequest, http.StatusBadRequest},
	{ErrConfig, http.StatusBadRequest},
	{ErrUnavailable, http.StatusServiceUnavailable},
	{ErrPinned, http.StatusConflict},
	{ErrLimit, http.StatusTooManyRequests},
}

// errorStatus is the HTTP status of an agent error; 500 for any other.
func errorStatus(err error) int {
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// statusError turns a peer's error answer back into the agent error of its
// status, with the peer's message.
func statusError(status int, msg string) error {
	for _, e := range statusTable {
		if e.status == status {
			return errkind.New(e.err, "%s", msg)
		}
	}
	return errors.New(msg)
}

// writeError answers with err's status and message.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, errorStatus(err), api.Error{Error: err.Error()})
}
