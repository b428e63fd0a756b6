package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		"load:\n  policy: lifo\n":    `config: load.policy: "lifo" is not allowed (fifo, beneficial)`,
		"load:\n  vector_size: 0\n":  "config: load.vector_size: 0 is out of range (1 to 1024)",
		"load:\n  interval: 1ms\n":   "config: load.interval: 1ms is out of range (10ms to 1h)",
		"bind_addr: nowhere\n":       `config: bind_addr: "nowhere" is not an IP address`,
		"gossip_port: 70000\n":       "config: gossip_port: 70000 is out of range (1 to 65535)",
		"capacity: -1\n":             "config: capacity: -1 is out of range (0 for the host's cores, or 0.01 to 4096)",
		"node_id: 'a b'\n":           `config: node_id: "a b" is not allowed (letters, digits, '.', '-'; 1 to 63 characters)`,
		"join: [\"no host:port\"]\n": `config: join: "no host:port": its port is not 1 to 65535`,
		"capacty: 1\n":               "config: capacty (line 2): not a known key",
		"load:\n  interval: soon\n":  `config: load.interval (line 3): "soon" is not a duration (e.g. 30s, 10m, 1h)`,
		"limits: {run_count: [1]}\n": "config: limits.run_count (line 2): a list is not a whole number",
		"scheduler: nosuch\n":        "config: scheduler: policy nosuch: not a built-in policy",
	}
	for in, want := range cases {
		if !strings.HasPrefix(in, "node_id") {
			in = "node_id: n1\n" + in
		}
		_, err := Parse([]byte(in))
		if err == nil || !errors.Is(err, peer.ErrConfig) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("config %q: error %v, want one line containing %q", in, err, want)
		}
	}
	if _, err := Parse([]byte("node_id: n1\nload:\n  policy: beneficial\n  interval: 500ms\n")); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

// A limit out of range is refused with its key named.
func TestLimitsConfig(t *testing.T) {
	for key, y := range map[string]string{
		"limits.run_count":              "limits: {run_count: 0}",
		"limits.arg_bytes":              "limits: {arg_bytes: 100}",
		"limits.output_bytes":           "limits: {output_bytes: 10}",
		"limits.output_bytes_per_user":  "limits: {output_bytes_per_user: 4096}",
		"limits.spool_bytes_per_user":   "limits: {spool_bytes_per_user: 2000000, output_bytes: 4000000}",
		"limits.keep_finished":          "limits: {keep_finished: 1s}",
		"limits.records_bytes_per_user": "limits: {records_bytes_per_user: 4096}",
	} {
		_, err := Parse([]byte("node_id: n1\n" + y + "\n"))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", y, err)
		}
	}
	c, err := Parse([]byte("node_id: n1\nlimits: {run_count: 50, keep_finished: 24h}\n"))
	if err != nil || c.Limits.RunCount != 50 || c.Limits.KeepFinished != 24*time.Hour || c.Limits.ArgBytes != limits.Default().ArgBytes {
		t.Fatalf("%+v %v", c.Limits, err)
	}
}
