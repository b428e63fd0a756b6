package sim

import "errors"

// errDead is the answer of a move to a node that died: the source's
// request times out.
var errDead = errors.New("destination is dead")
