package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"skiff.dev/skiff/controlplane/metrics"
)

// Server serves a Registry over HTTPS on Kubernetes-shaped paths.
type Server struct {
	cfg      Config
	reg      *Registry
	log      *slog.Logger
	metrics  *metrics.Metrics
	handler  http.Handler
	proxy    *Proxy      // pods/log and pods/exec
	inflight *inflight   // max in-flight requests (inflight.go)
	handlers handlerPool // the goroutines short requests' handlers run on (inflight.go)
	rbac     *rbacCache  // the RBAC objects the authorizer reads (rbac.go)
	// adapter are the custom and external metrics APIs' rules
	// (adapter_config.go).
	adapter *adapterRules

	// openapi serves /openapi/v2 and /openapi/v3 (openapi.go).
	openapi *openAPIServer

	// watchCtx ends every watch stream when the server shuts down: an
	// http.Server waits for requests to finish, and a watch never would.
	watchCtx  context.Context
	stopWatch context.CancelFunc

	mu sync.Mutex
	ln net.Listener
}

// New returns a server for reg. It does not listen yet (Listen or Run).
// When the registry's store keeps statistics (a Stats() store.Stats
// method, as store.Bolt) they are served at /metrics too, as skiff_store_*.
func New(cfg Config, reg *Registry, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("api server config: %w", err)
	}
	if reg == nil {
		return nil, errors.New("api server: no registry")
	}
	if err := reg.SetPodSecurity(cfg.podSecurity()); err != nil {
		return nil, fmt.Errorf("api server config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := cfg.Metrics
	if m == nil {
		m = metrics.New()
	}
	if st, ok := reg.store.(statser); ok {
		c := newStoreCollector(st)
		var are prometheus.AlreadyRegisteredError
		if err := m.Register(c); err != nil && !errors.As(err, &are) {
			return nil, fmt.Errorf("register store metrics: %w", err)
		}
	}
	lim, err := newInflight(cfg, m)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, reg: reg, log: logger, metrics: m, proxy: ProxyHandler(reg, cfg.AgentTLS), inflight: lim}
	adapterConfig := cfg.MetricsAdapterConfig
	if adapterConfig == nil {
		adapterConfig = DefaultAdapterConfig
	}
	if s.adapter, err = ParseAdapterConfig(adapterConfig); err != nil {
		return nil, fmt.Errorf("api server config: %w", err)
	}
	if s.openapi, err = newOpenAPIServer(cfg.Version); err != nil {
		return nil, fmt.Errorf("api server: %w", err)
	}
	s.watchCtx, s.stopWatch = context.WithCancel(context.Background())
	s.rbac = newRBACCache(s.watchCtx, reg, logger.With("component", "rbac"))
	reg.setAuthorizer(s) // escalation checks and in-process reads as a user (escalation.go, local.go)
	s.handler = s.routes()
	if cfg.Bootstrap != nil {
		api := s.handler
		s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, BootstrapPrefix) {
				cfg.Bootstrap.ServeHTTP(w, r)
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	return s, nil
}

// OwnWatches is how many store watches the server's own caches hold: the
// RBAC informers every API server runs, leader or not (the leader's
// controllers share another cache, controlplane.LeaderInformers).
func (s *Server) OwnWatches() int { return s.rbac.watches() }

// Stop ends what the server runs besides serving (watch streams, the
// RBAC cache's informers) when it was used through Handler alone, without
// Run. Safe twice; Run stops them itself.
func (s *Server) Stop() { s.stopWatch() }

// BootstrapPrefix starts the paths of Config.Bootstrap.
const BootstrapPrefix = "/skiff/v1/bootstrap/"

// Handler is the server's HTTP handler (authentication included), for
// tests with httptest or for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the rules the server serves.
func (s *Server) Registry() *Registry { return s.reg }

// Local returns an in-process client of the same registry.
func (s *Server) Local() *Local { return NewLocal(s.reg) }

// Metrics returns the metrics the server records and serves.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Listen opens the listening socket, so that Addr is known before Run.
// Run calls it when it was not called. It refuses to listen without
// Config.TLS: the API is served over HTTPS only.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	if s.cfg.TLS == nil || (len(s.cfg.TLS.Certificates) == 0 && s.cfg.TLS.GetCertificate == nil) {
		return errors.New("api server: listen: no TLS serving certificate (Config.TLS): the API is served over HTTPS only")
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("api server: listen: %w", err)
	}
	s.ln = ln
	return nil
}

// Addr is the address the server listens on ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Run creates the default namespace, serves until ctx ends, then shuts
// down: watch streams end at once, other requests get up to
// Config.ShutdownTimeout to finish. It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	// The managedFields type converter (apply.go) is built from client-go's
	// OpenAPI schema, once per process: start it now (controlplane.Start
	// has, and waits for it), as kube-apiserver builds its own at start, so
	// that the first writes (an agent's status, a student's first apply)
	// do not all wait for it.
	go WarmUp()
	if err := s.reg.EnsureDefaults(ctx); err != nil {
		s.ln.Close()
		return fmt.Errorf("api server: %w", err)
	}
	srv := &http.Server{
		Handler: s.handler,
		// What one connection can hold (config.go): its headers must
		// arrive within ReadHeaderTimeout (a slow-loris client is cut),
		// an idle keep-alive connection closes after IdleTimeout. There is
		// no ReadTimeout or WriteTimeout for the whole server: a watch
		// lives for minutes; short requests get their deadlines per
		// request (serveShort).
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// HTTPS only (Config.TLS); ServeTLS adds HTTP/2 to NextProtos.
		// A plain-HTTP request is answered 400 by net/http ("Client sent
		// an HTTP request to an HTTPS server") and gets no API data.
		TLSConfig: s.cfg.TLS.Clone(),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.ln, "", "") }()
	s.log.Info("api server listening", "addr", s.Addr())
	select {
	case err := <-errc:
		s.stopWatch()
		return fmt.Errorf("api server: serve: %w", err)
	case <-ctx.Done():
	}
	s.stopWatch()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Graceful shutdown is bounded: requests still running after
		// ShutdownTimeout (a slow client, a stuck proxy stream) are cut.
		s.log.Warn("api server: requests still running after the shutdown timeout; closing them", "timeout", s.cfg.ShutdownTimeout)
		err = srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("api server: shutdown: %w", err)
	}
	s.log.Info("api server stopped")
	return nil
}
