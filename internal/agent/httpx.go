package agent

import "roam/internal/agent/httpx"

// The routes' HTTP helpers are package httpx's, by the names the route
// table and the handlers call them.
const maxBody = httpx.MaxBody

var (
	decode      = httpx.Decode
	writeJSON   = httpx.WriteJSON
	writeError  = httpx.WriteError
	eventsSince = httpx.EventsSince
)
