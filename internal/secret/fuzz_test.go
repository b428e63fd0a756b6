package secret

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Fuzz target for the secret file's text (the one file roamd reads that
// every other key comes from). scripts/fuzz.sh runs it.

// FuzzParse: a secret Parse accepts is Size bytes, written back (String,
// what `roam keygen` writes) it reads as itself, and the keys derived
// from it are the same; anything else is ErrBad.
func FuzzParse(f *testing.F) {
	s := Secret(bytes.Repeat([]byte{0xa5}, Size))
	f.Add(s.String() + "\n")
	f.Add("  " + Secret(make([]byte, Size)).String() + "\r\n\n")
	f.Add(strings.TrimRight(s.String(), "="))
	f.Add(s.String()[:20] + "\n" + s.String()[20:])
	f.Add(Secret(bytes.Repeat([]byte{1}, Size+1)).String())
	f.Add("not base64 at all")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		sec, err := Parse(text)
		if err != nil {
			if !errors.Is(err, ErrBad) || sec != nil {
				t.Fatalf("refused with %v, %v", sec, err)
			}
			return
		}
		if len(sec) != Size {
			t.Fatalf("a secret of %d bytes accepted", len(sec))
		}
		again, err := Parse(sec.String() + "\n")
		if err != nil || !bytes.Equal(again, sec) || !bytes.Equal(again.GossipKey(), sec.GossipKey()) {
			t.Fatalf("secret %q written as %q read back as %q, %v", text, sec.String(), again, err)
		}
	})
}
