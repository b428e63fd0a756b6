package config

// FuzzParseConfig: the config file roamd reads.

import (
	"bytes"
	"errors"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/peer"
)

// FuzzParseConfig: a config Parse accepts keeps Validate's promises
// (every number finite and in range, paths absolute) and renders
// (Marshal, as `roam cluster up` writes it) to YAML that parses to the
// same config.
func FuzzParseConfig(f *testing.F) {
	c := Default()
	c.NodeID, c.InitPath = "n1", "/usr/libexec/roam/roam-init"
	f.Add(c.Marshal())
	for _, s := range []string{
		"node_id: n1\n",
		"node_id: n1\nbind_addr: 10.0.0.1\nadvertise_addr: 10.0.0.1\njoin: [10.0.0.2, \"node3:7000\", \"[fd00::3]\"]\ncapacity: 0.5\nload:\n  policy: beneficial\n  interval: 500ms\n  vector_size: 16\n",
		"node_id: n1\njob_cgroup: none\nshared_dirs: [/home, /srv/data]\nscheduler: balance\nimage_dir: /dev/shm/roam\ncriu_path: /usr/sbin/criu\n",
		"node_id: n1\nlimits:\n  run_count: 5\n  keep_finished: 1h\n  requests_per_second: 2.5\n",
		"node_id: n1\ngossip_port: 7947\n",
		"node_id: '../x'\n",
		"node_id: n1\njob_cgroup: ../x\n",
		"node_id: n1\ncapacity: -1\n",
		"node_id: n1\nload:\n  interval: 1ms\n",
		"node_id: n1\ncapacty: 1\n",
		"node_id: n1\n---\nnode_id: n2\n",
		"",
		"node_id: &a n1\nsocket: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, peer.ErrConfig) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		fzFinite(t, "config", reflect.ValueOf(c))
		switch {
		case !fzNodeID.MatchString(c.NodeID):
			t.Fatalf("node_id %q", c.NodeID)
		case net.ParseIP(c.BindAddr) == nil:
			t.Fatalf("bind_addr %q", c.BindAddr)
		case c.GossipPort < 1 || c.GossipPort > 65535 || c.PeerPort < 1 || c.PeerPort > 65535 || c.PeerPort == c.GossipPort:
			t.Fatalf("ports %d %d", c.GossipPort, c.PeerPort)
		case c.SecretFile == "" || c.StateDir == "" || c.Socket == "":
			t.Fatalf("secret_file %q, state_dir %q, socket %q", c.SecretFile, c.StateDir, c.Socket)
		case c.Capacity < 0 || c.Capacity > 4096:
			t.Fatalf("capacity %v", c.Capacity)
		case c.Load.Interval < 10*time.Millisecond || c.Load.Interval > time.Hour || c.Load.VectorSize < 1 || c.Load.VectorSize > 1024:
			t.Fatalf("load %+v", c.Load)
		}
		for _, p := range append([]string{c.InitPath, c.ImageDir, c.CRIUPath}, c.SharedDirs...) {
			if p != "" && !filepath.IsAbs(p) {
				t.Fatalf("path %q is not absolute", p)
			}
		}
		if j := c.JobCgroup; j != "" && j != "none" && (filepath.IsAbs(j) || filepath.Clean(j) != j || strings.HasPrefix(j, "..")) {
			t.Fatalf("job_cgroup %q", j)
		}
		again, err := Parse(c.Marshal())
		if err != nil {
			t.Fatalf("the config rendered does not parse: %v\n%s", err, c.Marshal())
		}
		if !bytes.Equal(again.Marshal(), c.Marshal()) {
			t.Fatalf("the config changed on a round trip:\n%s\nthen\n%s", c.Marshal(), again.Marshal())
		}
	})
}

// fzFinite fails on a float field anywhere in v that is NaN or infinite:
// no range check holds for those.
func fzFinite(t *testing.T, at string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("%s is %v", at, f)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fzFinite(t, at+"."+v.Type().Field(i).Name, v.Field(i))
		}
	}
}

// fzNodeID is a node id, as Validate promises it.
var fzNodeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)
