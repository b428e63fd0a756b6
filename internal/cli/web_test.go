package cli

import "testing"

// roam web warns of an address whose token would cross the network in
// clear, and only of one.
func TestWebWarnsOfCleartext(t *testing.T) {
	for addr, want := range map[string]bool{
		"http://198.18.55.1:9947/#token=x":  true,
		"http://node1.example:9947/#token=": true,
		"https://198.18.55.1:9947/#token=x": false,
		"http://127.0.0.1:9947/#token=x":    false,
		"http://[::1]:9947/#token=x":        false,
		"http://localhost:9947/#token=x":    false,
	} {
		if got := cleartext(addr); got != want {
			t.Errorf("cleartext(%s) = %v, want %v", addr, got, want)
		}
	}
}
