package peer

import (
	"errors"
	"net/http"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// The agent's errors. Each is made with errkind.New, so its message is
// complete for the user and it still matches its kind with errors.Is.
var (
	ErrPermission  = errors.New("permission denied")
	ErrNotFound    = errors.New("not found")
	ErrBadRequest  = errors.New("bad request")
	ErrUnavailable = errors.New("unavailable")
	// ErrLimit: the request would pass one of the node's limits.
	ErrLimit = errors.New("over a limit")
	// ErrConfig wraps every config error.
	ErrConfig = errors.New("config")
	// ErrPinned: the job cannot move (migrate.ErrPinned).
	ErrPinned = migrate.ErrPinned
)

// statusTable is the one table between the agent's errors and HTTP
// statuses: Status reads it from error to status at the API edge,
// FromStatus from status back to error on a peer's answer, so a kind keeps
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
	// A restart its job's home ended (another run took the job, or the
	// home restarted between its consent and its commit): try again.
	{migrate.ErrHomeAborted, http.StatusServiceUnavailable},
}

// Status is the HTTP status of an agent error; 500 for any other.
func Status(err error) int {
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// FromStatus turns a peer's error answer back into the agent error of its
// status, with the peer's message.
func FromStatus(status int, msg string) error {
	for _, e := range statusTable {
		if e.status == status {
			return errkind.New(e.err, "%s", msg)
		}
	}
	return errors.New(msg)
}

// Err turns a peer exchange's error (api.Exchange) into the agent's
// kinds: no answer is ErrUnavailable, an error answer its status's kind.
func Err(err error) error {
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return errkind.New(ErrUnavailable, "%v", te.Err)
	case errors.As(err, &re):
		return FromStatus(re.Status, re.Msg)
	}
	return err
}
