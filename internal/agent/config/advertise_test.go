package config

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// fakeRoutes answers Source from a table of join addresses and Local with
// a fixed list.
func fakeRoutes(src map[string]string, local ...string) Routes {
	return Routes{
		Source: func(hp string) (net.IP, error) {
			if s, ok := src[hp]; ok {
				return net.ParseIP(s), nil
			}
			return nil, errors.New("no route to host")
		},
		Local: func() ([]net.IP, error) {
			var ips []net.IP
			for _, l := range local {
				ips = append(ips, net.ParseIP(l))
			}
			return ips, nil
		},
	}
}

// The advertised address is never 0.0.0.0: it is advertise_addr, a
// specific bind_addr, the route to the first join peer that has one, or
// the host's only global address; otherwise the agent refuses to start and
// says what to set.
func TestResolveAdvertise(t *testing.T) {
	base := Default()
	base.NodeID = "n1"
	cases := []struct {
		name    string
		edit    func(*Config)
		routes  Routes
		want    string
		wantErr string
	}{
		{"advertise_addr wins", func(c *Config) { c.AdvertiseAddr = "198.18.7.9"; c.BindAddr = "198.18.7.1" },
			fakeRoutes(nil), "198.18.7.9", ""},
		{"a specific bind_addr", func(c *Config) { c.BindAddr = "198.18.7.1" }, fakeRoutes(nil), "198.18.7.1", ""},
		{"route to the first join peer", func(c *Config) { c.Join = []string{"198.18.7.2:7946", "198.18.7.3"} },
			fakeRoutes(map[string]string{"198.18.7.2:7946": "198.18.7.5", "198.18.7.3:7946": "198.18.7.6"}), "198.18.7.5", ""},
		{"a join peer without a port uses the gossip port", func(c *Config) { c.Join = []string{"head.cluster"} },
			fakeRoutes(map[string]string{"head.cluster:7946": "198.18.7.5"}), "198.18.7.5", ""},
		{"the first peer that routes", func(c *Config) { c.Join = []string{"198.18.9.9:7946", "198.18.7.3:7946"} },
			fakeRoutes(map[string]string{"198.18.7.3:7946": "198.18.7.6"}), "198.18.7.6", ""},
		{"no peer routes", func(c *Config) { c.Join = []string{"198.18.9.9:7946"} },
			fakeRoutes(nil), "", "no join peer gives a route (198.18.9.9:7946: no route to host)"},
		{"a route from 0.0.0.0 is no route", func(c *Config) { c.Join = []string{"198.18.9.9:7946"} },
			fakeRoutes(map[string]string{"198.18.9.9:7946": "0.0.0.0"}), "", "no join peer gives a route"},
		{"no join: the host's one global address", func(*Config) {},
			fakeRoutes(nil, "127.0.0.1", "::1", "198.18.7.4", "fe80::1"), "198.18.7.4", ""},
		{"no join: one IPv4 beside IPv6", func(*Config) {},
			fakeRoutes(nil, "127.0.0.1", "2001:db8::4", "198.18.7.4"), "198.18.7.4", ""},
		{"no join: only IPv6", func(*Config) {},
			fakeRoutes(nil, "::1", "2001:db8::4", "fe80::4"), "2001:db8::4", ""},
		{"no join, several addresses", func(*Config) {},
			fakeRoutes(nil, "127.0.0.1", "198.18.7.4", "198.18.8.4"), "", "several addresses (198.18.7.4, 198.18.8.4)"},
		{"no join, no address", func(*Config) {}, fakeRoutes(nil, "127.0.0.1"), "", "no global address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := ResolveAdvertise(c, tc.routes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "advertise_addr") {
					t.Fatalf("err = %v, want one naming advertise_addr and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ip, ok := got.Advertise()
			if !ok || ip.String() != tc.want {
				t.Fatalf("advertises %v (%v), want %s", ip, ok, tc.want)
			}
		})
	}
}

// Wrong addresses are refused by name, with what is allowed.
func TestConfigAddressErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"advertise_addr: 0.0.0.0", "advertise_addr: 0.0.0.0 cannot be reached"},
		{"advertise_addr: nodeA", `advertise_addr: "nodeA" is not an IP address`},
		{"advertise_addr: 224.0.0.1", "advertise_addr: 224.0.0.1 cannot be reached"},
		{"join: [\"bad name!:7946\"]", `join: "bad name!:7946": not an IP address or a host name`},
		{"join: [\"198.18.7.2:99999\"]", `join: "198.18.7.2:99999": its port is not 1 to 65535`},
	} {
		_, err := Parse([]byte("node_id: n1\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line with %q", tc.yaml, err, tc.want)
		}
	}
	for _, ok := range []string{"join: [head.example, \"198.18.7.2\", \"198.18.7.3:8000\", \"[2001:db8::1]:7946\"]"} {
		if _, err := Parse([]byte("node_id: n1\n" + ok + "\n")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
