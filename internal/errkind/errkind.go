// Package errkind makes errors whose message is complete for the user and
// that still match a sentinel with errors.Is, so an API edge can map them to
// codes without the sentinel's text showing up in every message.
package errkind

import (
	"fmt"
	"strconv"
)

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// New returns an error with the formatted message, of the given kind.
func New(kind error, format string, a ...any) error {
	return &kindError{msg: fmt.Sprintf(format, a...), kind: kind}
}

// QuoteOdd quotes text a user or a peer chose, for a one-line error or
// log line, when it holds anything but plain printable characters or is
// longer than max bytes (max 0: any length).
func QuoteOdd(s string, max int) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s || (max > 0 && len(s) > max) {
		return q
	}
	return s
}
