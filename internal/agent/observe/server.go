package observe

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"roam/internal/api"
	"roam/internal/connlimit"
)

//go:embed page
var page embed.FS

// TokenRoute is the route of the roam socket that mints a token for its
// caller (roam web).
const TokenRoute = "POST " + api.PathWebToken

// Server is the metrics_addr listener: /metrics, the web view and its
// event stream.
type Server struct {
	cfg    Config
	log    *slog.Logger
	tokens *Tokens
	// headerTimeout is headerTimeout but in the tests.
	headerTimeout time.Duration

	mu     sync.Mutex
	hub    *Hub
	srv    *http.Server
	stop   context.CancelFunc
	done   chan struct{}
	scheme string
	addr   string // what it listens on, once it does
}

// New makes the server; nothing listens until Start. Its token route can
// be put on the roam socket before.
func New(cfg Config, log *slog.Logger) *Server {
	return &Server{cfg: cfg, log: log, tokens: NewTokens(tokenTTL, maxTokens, maxTokensPerUID), headerTimeout: headerTimeout}
}

// SocketRoutes puts the token route on the roam socket's mux; uid says
// who called (SO_PEERCRED).
func (s *Server) SocketRoutes(mux *http.ServeMux, uid func(*http.Request) (uint32, bool)) {
	mux.HandleFunc(TokenRoute, func(w http.ResponseWriter, r *http.Request) {
		u, ok := uid(r)
		if !ok {
			writeErr(w, http.StatusForbidden, "web token: the caller is not known (not a unix socket)")
			return
		}
		res, status, err := s.mint(u)
		if err != nil {
			writeErr(w, status, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
}

// mint makes a token for uid and the page's address with it.
func (s *Server) mint(uid uint32) (api.WebToken, int, error) {
	s.mu.Lock()
	addr, scheme := s.addr, s.scheme
	s.mu.Unlock()
	if addr == "" {
		return api.WebToken{}, http.StatusServiceUnavailable, errors.New("web view: off on this node (set metrics_addr in roamd's config)")
	}
	tok, exp, err := s.tokens.Mint(uid, time.Now())
	if err != nil {
		return api.WebToken{}, http.StatusTooManyRequests, err
	}
	return api.WebToken{URL: scheme + "://" + addr + "/#token=" + tok, Expires: exp}, http.StatusOK, nil
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// Start listens on cfg.Addr (nothing when it is empty) and serves the
// scrape of agent's metrics and the node's own collectors, and the web
// view of src.
func (s *Server) Start(src Source, agent prometheus.Gatherer) error {
	if s.cfg.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("metrics_addr: %w", err)
	}
	hub := NewHub(src)
	reg := prometheus.NewRegistry()
	if err := Register(reg, hub, src, s.cfg.JobUsers); err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if s.cfg.WebConfigFile != "" {
		if tlsOn, err := tlsEnabled(s.cfg.WebConfigFile); err != nil {
			ln.Close()
			return fmt.Errorf("metrics_web_config: %w", err)
		} else if tlsOn {
			scheme = "https"
		}
	}
	mux := s.routes(hub, prometheus.Gatherers{agent, reg})
	srv := &http.Server{
		Handler: hostChecked(ln.Addr().String(), mux),
		// No WriteTimeout: it would end every page's stream with it; each
		// write is bounded by connlimit's writeTimeout instead.
		ReadHeaderTimeout: s.headerTimeout,
		ReadTimeout:       s.headerTimeout, // GET only: no body to wait for
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(slogWriter{s.log}, "", 0),
	}
	bounded := connlimit.New(ln, connlimit.Bounds{Caps: connlimit.Caps{Total: maxConns, PerKey: maxConnsPerIP}, WriteTimeout: writeTimeout, Key: connlimit.RemoteIP})
	ctx, stop := context.WithCancel(context.Background())
	s.mu.Lock()
	s.hub, s.srv, s.stop, s.done, s.scheme = hub, srv, stop, make(chan struct{}), scheme
	s.addr = pageAddr(ln.Addr().String(), s.cfg.Advertise)
	done := s.done
	s.mu.Unlock()
	go hub.Run(ctx)
	cfgPath := s.cfg.WebConfigFile
	no := false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{s.cfg.Addr}, WebSystemdSocket: &no, WebConfigFile: &cfgPath}
	go func() {
		defer close(done)
		if err := web.Serve(bounded, srv, flags, s.log); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics_addr: serving stopped", "addr", s.cfg.Addr, "err", err)
		}
	}()
	return nil
}

// Addr is the host:port the page is reached at ("" while not listening).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops the listener, every page's stream and the hub.
func (s *Server) Close() {
	s.mu.Lock()
	srv, stop, done := s.srv, s.stop, s.done
	s.addr = ""
	s.mu.Unlock()
	if srv == nil {
		return
	}
	stop()
	_ = srv.Close()
	<-done
}

// pageAddr is the listener's address as a page reaches it: the node's
// advertised address in place of an unspecified one.
func pageAddr(listen, advertise string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); (ip == nil || ip.IsUnspecified()) && advertise != "" {
		host = advertise
	}
	return net.JoinHostPort(host, port)
}

// tlsEnabled says whether a web config file turns TLS on.
func tlsEnabled(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var c web.Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return false, err
	}
	return c.TLSConfig.IsEnabled(), nil
}

// routes are the listener's: GET only.
func (s *Server) routes(hub *Hub, g prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: log.New(slogWriter{s.log}, "", 0), MaxRequestsInFlight: 4, Timeout: 30 * time.Second}))
	static, _ := fs.Sub(page, "page")
	files := http.FileServerFS(static)
	page := pageHeaders(files)
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /app.js", page)
	mux.Handle("GET /style.css", page)
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet { // a HEAD would hold a stream that says nothing
			http.Error(w, "web view: GET only", http.StatusMethodNotAllowed)
			return
		}
		s.stream(hub, w, r)
	})
	return mux
}

// pageHeaders are the page's: its own scripts and styles only, in no
// frame, sent nowhere else.
func pageHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// hostChecked refuses, on a loopback listener, a request whose Host is a
// name other than localhost: a web site a local user visits could point
// its own name at 127.0.0.1 (DNS rebinding) and read the listener.
func hostChecked(listen string, h http.Handler) http.Handler {
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			name = h
		}
		if net.ParseIP(strings.Trim(name, "[]")) == nil && name != "localhost" {
			http.Error(w, "metrics_addr: a loopback listener answers to an IP address or localhost, not "+strconv.Quote(name), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// stream is a page's one event stream, in the scope its token gives.
func (s *Server) stream(hub *Hub, w http.ResponseWriter, r *http.Request) {
	scope, key := Scope{}, "ip "+strings.TrimSpace(hostOf(r.RemoteAddr))
	end := time.Now().Add(anonStreamLife)
	if tok := r.URL.Query().Get("token"); tok != "" {
		uid, exp, ok := s.tokens.Check(tok, time.Now())
		if !ok {
			http.Error(w, "web view: the token is unknown or expired (roam web makes another)", http.StatusForbidden)
			return
		}
		scope, key, end = Scope{User: true, UID: uid}, "uid "+itoa(uid), exp
	}
	c, err := hub.join(scope, key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer hub.leave(c)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	over := time.NewTimer(time.Until(end))
	defer over.Stop()
	for {
		var msg []byte
		select {
		case <-r.Context().Done():
			return
		case <-over.C: // the token expired, or a page without one is due to reconnect
			return
		case <-c.gone:
			return
		case <-ping.C:
			msg = []byte(": ping\n\n")
		case msg = <-c.out:
		}
		if _, err := w.Write(msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// slogWriter sends net/http's log lines to the agent's log.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn("metrics_addr", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
