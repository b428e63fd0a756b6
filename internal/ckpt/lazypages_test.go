package ckpt

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCRIU writes a script that stands for `criu lazy-pages`: body runs
// with $DIR set to the images directory (-D).
func fakeCRIU(t *testing.T, body string) *Host {
	t.Helper()
	path := filepath.Join(t.TempDir(), "criu")
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -D ] && DIR=$2; shift; done\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Host{CRIU: CRIU{Path: path, ExecMu: &sync.Mutex{}}}
}

func noDial() (net.Conn, error) { return nil, errors.New("no source in this test") }

func TestLazyPagesWaitsForTheDaemonToSayItIsReady(t *testing.T) {
	// It says so on the status pipe (fd 4) after a while, then serves.
	h := fakeCRIU(t, "sleep 0.2; printf '\\0' >&4; exec sleep 30")
	t0 := time.Now()
	done, stop, err := h.LazyPages(t.TempDir(), noDial)
	if err != nil {
		t.Fatalf("LazyPages: %v", err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("LazyPages returned after %v, before the daemon said it was ready", d)
	}
	select {
	case <-done:
		t.Fatal("done before stop: the daemon still serves")
	default:
	}
	stop()
	<-done
}

func TestLazyPagesReportsADaemonThatEnds(t *testing.T) {
	h := fakeCRIU(t, "echo 'Error (criu/uffd.c:1418): no pstree image' > \"$DIR/lazy-pages.log\"; exit 1")
	_, _, err := h.LazyPages(t.TempDir(), noDial)
	if err == nil || !strings.Contains(err.Error(), "no pstree image") {
		t.Fatalf("LazyPages = %v, want the daemon's last log line", err)
	}
}
