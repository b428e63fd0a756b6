package api

import "time"

// WebToken is `roam web`'s answer: the address of the node's web view
// with a token minted for the caller, and when the token expires.
type WebToken struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}
