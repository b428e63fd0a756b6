package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"roam/internal/agent/peer"
	"roam/internal/errkind"
)

// The address a node gives its peers. Every other node reaches this one
// through it: memberlist gossips it, and a job placed elsewhere sends its
// output and exit status to its home at it. An unspecified address
// (0.0.0.0) there would make each of them talk to itself, so the agent
// never advertises one and refuses to start when it cannot find a usable
// address.

// Routes is what the choice of an advertised address needs to know about
// the host: the local address the kernel would use to reach a join peer,
// and the host's own addresses. ResolveAdvertise reads them from the
// network stack; tests give their own.
type Routes struct {
	// Source returns the local address packets to hostport would leave
	// from (resolving a name first); it sends nothing.
	Source func(hostport string) (net.IP, error)
	// Local lists the addresses of the host's interfaces that are up.
	Local func() ([]net.IP, error)
}

// HostRoutes reads routes from this host's network stack: a UDP socket
// connected to the peer (no packet leaves) tells which source address the
// kernel picked.
func HostRoutes() Routes {
	return Routes{
		Source: func(hostport string) (net.IP, error) {
			c, err := net.Dial("udp", hostport)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.LocalAddr().(*net.UDPAddr).IP, nil
		},
		Local: func() ([]net.IP, error) {
			ifs, err := net.Interfaces()
			if err != nil {
				return nil, err
			}
			var ips []net.IP
			for _, ifc := range ifs {
				if ifc.Flags&net.FlagUp == 0 {
					continue
				}
				addrs, err := ifc.Addrs()
				if err != nil {
					continue
				}
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok {
						ips = append(ips, n.IP)
					}
				}
			}
			return ips, nil
		},
	}
}

// Advertise returns the address the node advertises, decided without I/O
// when the config says enough: advertise_addr, else a bind_addr that is a
// specific address. ok is false when routes must be asked (ResolveAdvertise).
func (c Config) Advertise() (ip net.IP, ok bool) {
	if c.AdvertiseAddr != "" {
		return net.ParseIP(c.AdvertiseAddr), true
	}
	if b := net.ParseIP(c.BindAddr); b != nil && !b.IsUnspecified() {
		return b, true
	}
	return nil, false
}

// ResolveAdvertise fills in advertise_addr when the config leaves it to
// the host: the source address of the route to the first join peer that
// resolves, else the host's one global IPv4 address (or its one global
// address). It names what it tried when
// none is usable.
func ResolveAdvertise(c Config, r Routes) (Config, error) {
	if _, ok := c.Advertise(); ok {
		return c, nil
	}
	usable := func(ip net.IP) bool {
		return ip != nil && !ip.IsUnspecified() && !ip.IsMulticast()
	}
	var tried []string
	for _, j := range c.Join {
		ip, err := r.Source(JoinAddr(j, c.GossipPort))
		if err == nil && usable(ip) {
			c.AdvertiseAddr = ip.String()
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("routes from %v", ip)
		}
		tried = append(tried, fmt.Sprintf("%s: %v", j, err))
	}
	if len(c.Join) == 0 {
		ips, err := r.Local()
		if err != nil {
			return c, errkind.New(peer.ErrConfig, "config: advertise_addr: not set, and the host's addresses cannot be read: %v", err)
		}
		// IPv4 first: a host with one IPv4 and one IPv6 address (most
		// have) advertises the IPv4 one.
		var global, v4 []string
		for _, ip := range ips {
			if usable(ip) && ip.IsGlobalUnicast() {
				global = append(global, ip.String())
				if ip.To4() != nil {
					v4 = append(v4, ip.String())
				}
			}
		}
		switch {
		case len(v4) == 1:
			c.AdvertiseAddr = v4[0]
			return c, nil
		case len(v4) == 0 && len(global) == 1:
			c.AdvertiseAddr = global[0]
			return c, nil
		}
		if len(global) == 0 {
			return c, errkind.New(peer.ErrConfig, "config: advertise_addr: not set, bind_addr is %s, no join peers, and the host has no global address: set advertise_addr", c.BindAddr)
		}
		return c, errkind.New(peer.ErrConfig, "config: advertise_addr: not set, bind_addr is %s, no join peers, and the host has several addresses (%s): set advertise_addr to the one other nodes reach", c.BindAddr, strings.Join(global, ", "))
	}
	return c, errkind.New(peer.ErrConfig, "config: advertise_addr: not set, bind_addr is %s, and no join peer gives a route (%s): set advertise_addr", c.BindAddr, strings.Join(tried, "; "))
}

// JoinAddr is a join entry as host:port: an entry without a port means
// the gossip port.
func JoinAddr(entry string, gossipPort int) string {
	host, port := splitJoin(entry)
	if port == "" {
		port = strconv.Itoa(gossipPort)
	}
	return net.JoinHostPort(host, port)
}

// splitJoin splits a join entry into its host and its port, "" when it
// has none (a bare IPv6 address may be bracketed).
func splitJoin(entry string) (host, port string) {
	if h, p, err := net.SplitHostPort(entry); err == nil {
		return h, p
	}
	return strings.Trim(entry, "[]"), ""
}

// checkJoin validates one join entry: an IP address or a DNS name, with a
// port or without.
func checkJoin(entry string) error {
	host, port := splitJoin(entry)
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("its port is not 1 to 65535")
		}
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if !hostnamePattern.MatchString(host) {
		return errors.New("not an IP address or a host name, with an optional :port")
	}
	return nil
}
