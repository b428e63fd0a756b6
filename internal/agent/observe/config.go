package observe

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// The bounds of the listener, named once. Each is what a person or a
// Prometheus needs with room to spare; a client past one is refused.
const (
	// maxConns is the listener's connections at once, and maxConnsPerIP
	// one remote address's (connlimit).
	maxConns      = 256
	maxConnsPerIP = 32
	// maxStreams is the pages open at once on this node, and
	// maxStreamsPerKey one user's (or, without a token, one address's).
	maxStreams       = 64
	maxStreamsPerKey = 8
	// maxAnonStreams is the pages without a token at once: the others are
	// kept for the users who have one. anonStreamLife ends such a page's
	// stream (its browser opens it again), and a token's stream ends as
	// its token expires.
	maxAnonStreams = 16
	anonStreamLife = 10 * time.Minute
	// maxTokens is the tokens alive at once, maxTokensPerUID one user's
	// (minting another drops their oldest), tokenTTL a token's life.
	maxTokens       = 1024
	maxTokensPerUID = 8
	tokenTTL        = 12 * time.Hour
	// headerTimeout bounds a request's TLS handshake and headers,
	// idleTimeout a kept-alive connection between requests, writeTimeout
	// one write of an answer (a page that stops reading is cut), and
	// maxHeaderBytes a request's headers.
	headerTimeout  = 10 * time.Second
	idleTimeout    = 2 * time.Minute
	writeTimeout   = 30 * time.Second
	maxHeaderBytes = 16 << 10
	// sampleEvery is how often the nodes' figures are sampled for the
	// pages' charts, historyLen how many samples are kept (five minutes),
	// maxHistoryNodes how many nodes' (a larger cluster's others are not
	// charted).
	sampleEvery     = time.Second
	historyLen      = 300
	maxHistoryNodes = 1024
	// jobsEvery is how often the jobs are asked for while a page is open:
	// a migration shows on a page at most this late (plus the fan-out to
	// every node), against the 1 s goal of docs/benchmarks.md.
	// eventsEvery is the same for the scheduler's events.
	jobsEvery   = 250 * time.Millisecond
	eventsEvery = 500 * time.Millisecond
	// metricsMaxAge is how old the jobs a scrape reports may be: several
	// Prometheus servers scraping at once cost one fan-out.
	metricsMaxAge = 5 * time.Second
	// newsWindow is how old a migration first seen in a job's log may be
	// and still be told as news (a home that did not answer a poll or two
	// lists its jobs' migrations again when it does).
	newsWindow = time.Minute
	// keepEvents is how many recent events a new page is shown.
	keepEvents = 50
	// pingEvery keeps an idle stream's proxies from closing it.
	pingEvery = 15 * time.Second
	// clientQueue is the messages waiting for one page; a page further
	// behind is cut (it reconnects and starts afresh).
	clientQueue = 64
)

// Config is the listener's part of roamd's config.
type Config struct {
	// Addr is metrics_addr, host:port; empty: no listener.
	Addr string
	// WebConfigFile is metrics_web_config: an exporter-toolkit web
	// config file (TLS, basic auth); empty: plain HTTP, no auth.
	WebConfigFile string
	// Advertise is the node's address, put in the page's address when
	// Addr listens on every interface.
	Advertise string
	// JobUsers is metrics_job_users: the scrape's job gauges carry each
	// job's user. Off, they count by node and state only: whoever reaches
	// the listener (every local user, on loopback) would read every
	// user's name there.
	JobUsers bool
}

// CheckConfig checks metrics_addr and metrics_web_config and names the
// first wrong one by its config key.
func CheckConfig(addr, webConfig string) (string, error) {
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "metrics_addr", fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:9947)", addr)
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "" {
			return "metrics_addr", fmt.Errorf("%q is not an IP address (e.g. 127.0.0.1:9947)", host)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "metrics_addr", fmt.Errorf("port %q is out of range (1 to 65535)", port)
		}
	}
	if webConfig == "" {
		return "", nil
	}
	if addr == "" {
		return "metrics_web_config", fmt.Errorf("set without metrics_addr (no listener to configure)")
	}
	if !filepath.IsAbs(webConfig) {
		return "metrics_web_config", fmt.Errorf("%q is not an absolute path", webConfig)
	}
	if err := web.Validate(webConfig); err != nil {
		return "metrics_web_config", fmt.Errorf("%s: %v", webConfig, oneLine(err))
	}
	return "", nil
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}
