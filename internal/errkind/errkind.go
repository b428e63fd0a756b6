// Package errkind makes errors whose message is complete for the user and
// that still match a sentinel with errors.Is, so an API edge can map them to
// codes without the sentinel's text showing up in every message.
package errkind

import "fmt"

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
