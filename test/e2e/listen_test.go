package e2e

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listeners are the TCP sockets listening in pid's network namespace, as
// dialable addresses.
func listeners(pid int) map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			hostHex, portHex, ok := strings.Cut(fs[1], ":")
			port, err := strconv.ParseUint(portHex, 16, 16)
			if !ok || err != nil {
				continue
			}
			raw, err := hex.DecodeString(hostHex)
			if err != nil {
				continue
			}
			var ip net.IP
			if len(raw) == 4 {
				ip = net.IPv4(raw[3], raw[2], raw[1], raw[0])
				if ip.IsUnspecified() {
					ip = net.IPv4(127, 0, 0, 1)
				}
			} else {
				ip = net.IPv6loopback // any address of ours answers there too
			}
			out[net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))] = true
		}
	}
	return out
}

// probeIn connects to addr from inside pid's network namespace, as a
// process on that node would, and returns what it reads within wait.
func probeIn(pid int, addr string, wait time.Duration) (int, error) {
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{0, err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{0, err}
			return
		}
		c, err := net.DialTimeout("tcp", addr, wait)
		if err != nil {
			ch <- result{0, err}
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		ch <- result{n, nil}
	}()
	r := <-ch
	return r.n, r.err
}

// listenWatch watches the TCP listeners of agents' namespaces while
// migrations run: a new one is a port any process on the node could
// reach; every listener is probed from inside, as such a process would.
type listenWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	appeared   []string
	answered   []string
	probes     int
}

func watchListeners(agents map[string]int) *listenWatch {
	w := &listenWatch{stop: make(chan struct{}), done: make(chan struct{})}
	base := map[string]map[string]bool{}
	for node, pid := range agents {
		base[node] = listeners(pid)
	}
	go func() {
		defer close(w.done)
		lastProbe := time.Time{}
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			probe := time.Since(lastProbe) > 100*time.Millisecond
			if probe {
				lastProbe = time.Now()
			}
			for node, pid := range agents {
				for addr := range listeners(pid) {
					w.mu.Lock()
					if !base[node][addr] {
						w.appeared = append(w.appeared, fmt.Sprintf("%s: node %s", time.Now().Format("15:04:05.000"), addr))
						base[node][addr] = true // once each
					}
					w.mu.Unlock()
					if probe {
						n, err := probeIn(pid, addr, 50*time.Millisecond)
						w.mu.Lock()
						w.probes++
						if err == nil && n > 0 {
							w.answered = append(w.answered, fmt.Sprintf("node %s %s sent %d bytes", node, addr, n))
						}
						w.mu.Unlock()
					}
				}
			}
		}
	}()
	return w
}

// end stops the watch and fails the test when a listener appeared or a
// probe was answered.
func (w *listenWatch) end(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if len(w.appeared) > 0 || len(w.answered) > 0 {
		t.Fatalf("during the migrations: new listeners %v; answers to a local process %v", w.appeared, w.answered)
	}
	t.Logf("listeners: none new; %d probes from inside the nodes got nothing", w.probes)
}

// agentPIDs are the cluster's agents' pids by node.
func (c *cluster) agentPIDs() map[string]int {
	out := map[string]int{}
	for _, n := range c.status().Nodes {
		out[n.ID] = n.PID
	}
	return out
}
