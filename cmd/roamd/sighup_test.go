package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/secret"
)

// TestMain lets a test run this binary as roamd (ROAMD_TEST_RUN=DIR):
// in a mount namespace of its own (made by the test), with DIR bound on
// /run/roam, so that what roamd keeps there (CRIU's cache, the cgroup
// yard) is its own and the host's is left alone.
func TestMain(m *testing.M) {
	if dir := os.Getenv("ROAMD_TEST_RUN"); dir != "" {
		if err := syscall.Mount(dir, "/run/roam", "", syscall.MS_BIND, ""); err != nil {
			fmt.Fprintf(os.Stderr, "roamd test: bind %s on /run/roam: %v\n", dir, err)
			os.Exit(3)
		}
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// A real roamd on loopback: kill -HUP leaves it running and reloads its
// config. A changed scheduler runs at once (roam policy show names it);
// a changed port is named as needing a restart; a config that no longer
// passes its check is refused in the log and changes nothing; SIGTERM
// still stops it, with status 0. Under systemd (Type=notify) it says
// READY=1 once its socket answers, RELOADING=1 and READY=1 around a
// reload, and STOPPING=1.
func TestSIGHUPReloadsAndKeepsRunning(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: roamd runs as root")
	}
	dir := t.TempDir()
	sec := filepath.Join(dir, "secret")
	if err := secret.New().WriteFile(sec); err != nil {
		t.Fatal(err)
	}
	initPath := filepath.Join(dir, "roam-init")
	if err := os.WriteFile(initPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	// An address of loopback's /8 of its own: the ports other packages'
	// tests take on 127.0.0.1 meanwhile (go test runs them side by side)
	// cannot be the ones it found free.
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(256), 1+rand.IntN(250))
	gossip := freeLoopbackPort(t, host)
	base := "node_id: hup1\nbind_addr: " + host + "\ngossip_port: " + strconv.Itoa(gossip) + "\npeer_port: " + strconv.Itoa(freeLoopbackPort(t, host)) +
		"\nsecret_file: " + sec + "\nstate_dir: " + filepath.Join(dir, "state") + "\nsocket: " + sock +
		"\ninit_path: " + initPath + "\njob_cgroup: none\n"
	conf := filepath.Join(dir, "roamd.yaml")
	writeConf := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConf(base + "scheduler: static\n")
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o755); err != nil || os.MkdirAll("/run/roam", 0o755) != nil {
		t.Fatal(err)
	}
	notifyPath := filepath.Join(dir, "notify")
	notes, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notes.Close() })
	exited := make(chan error, 1)
	noteCh := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := notes.Read(buf)
			if err != nil {
				return
			}
			noteCh <- string(buf[:n])
		}
	}()
	// logged is every line roamd logged so far; ended closes when its
	// stderr does (it exited).
	var logMu sync.Mutex
	var logged []string
	ended := make(chan struct{})
	roamdLog := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Join(logged, "\n")
	}
	// nextNote is systemd's next notification from roamd; roamd's end
	// before it fails at once, with what roamd logged.
	nextNote := func() string {
		t.Helper()
		select {
		case n := <-noteCh:
			return n
		case <-ended:
			select {
			case n := <-noteCh:
				return n
			default:
			}
			var status error
			select {
			case status = <-exited:
				exited <- status // for the cleanup
			case <-time.After(10 * time.Second):
			}
			t.Fatalf("roamd ended (%v) before its next notification to systemd; it logged:\n%s", status, roamdLog())
		case <-time.After(time.Minute):
			t.Fatalf("no notification to systemd in a minute; roamd logged:\n%s", roamdLog())
		}
		return ""
	}
	cmd := exec.Command(os.Args[0], "--config", conf)
	cmd.Env = append(os.Environ(), "ROAMD_TEST_RUN="+run, "NOTIFY_SOCKET="+notifyPath)
	// Go makes the new namespace's mounts private before it runs roamd.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			logMu.Lock()
			logged = append(logged, sc.Text())
			logMu.Unlock()
			lines <- sc.Text()
		}
		close(ended)
		close(lines)
		_, _ = io.Copy(io.Discard, logs)
		exited <- cmd.Wait()
	}()
	// waitLog waits for a log line holding every part.
	waitLog := func(parts ...string) string {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("roamd ended before logging %q", parts)
				}
				all := true
				for _, p := range parts {
					all = all && strings.Contains(l, p)
				}
				if all {
					return l
				}
			case <-deadline:
				t.Fatalf("no log line with %q in a minute", parts)
			}
		}
	}
	if n := nextNote(); n != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", n)
	}
	cl := api.NewClient(sock)
	policy := func() string {
		t.Helper()
		var ps []api.NodePolicy
		if err := cl.Get(api.PathPolicy, &ps); err != nil || len(ps) != 1 {
			t.Fatalf("policy show: %+v %v", ps, err)
		}
		return ps[0].Name
	}
	// Ready means its socket answers: no wait.
	if p := policy(); p != "static" {
		t.Fatalf("running %s, want static", p)
	}
	hup := func() {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	writeConf(base + "scheduler: balance\n")
	hup()
	if r, d := nextNote(), nextNote(); r != "RELOADING=1" || d != "READY=1" {
		t.Fatalf("notifications around a reload: %q, %q", r, d)
	}
	waitLog("SIGHUP: config reloaded", "took=scheduler")
	if p := policy(); p != "balance" {
		t.Fatalf("running %s after the reload, want balance", p)
	}
	writeConf(strings.Replace(base, "gossip_port: "+strconv.Itoa(gossip), "gossip_port: "+strconv.Itoa(gossip+1), 1) + "scheduler: balance\n")
	hup()
	waitLog("SIGHUP: config reloaded", "needs_restart=gossip_port")
	writeConf(base + "scheduler: nosuch\n")
	hup()
	waitLog("SIGHUP: config not reloaded, nothing changed", "scheduler: policy nosuch")
	if p := policy(); p != "balance" {
		t.Fatalf("running %s after a refused reload, want balance", p)
	}
	for range 2 { // the two reloads since
		nextNote()
		nextNote()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if n := nextNote(); n != "STOPPING=1" {
		t.Fatalf("notification on SIGTERM %q, want STOPPING=1", n)
	}
	go func() {
		for range lines {
		}
	}()
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("roamd after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("roamd did not stop on SIGTERM")
	}
}

// freeLoopbackPort is a port free for TCP and UDP on host, a loopback
// address.
func freeLoopbackPort(t *testing.T, host string) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			u.Close()
			return p
		}
	}
	t.Fatal("no free port on loopback")
	return 0
}
