package apiserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"skiff.dev/skiff/controlplane/metrics"
)

// Authorization modes of Config.Authorization.
const (
	AuthorizationRBAC        = ""
	AuthorizationAlwaysAllow = "AlwaysAllow"
)

// Config of the HTTP server.
type Config struct {
	// Listen is the TCP address to serve on, host:port (port 0 picks a free one).
	Listen string
	// TLS is what the server serves HTTPS with: its serving certificate
	// (DATA-DIR/pki/apiserver.crt, SANs: every address it is reached at)
	// and ClientCAs the cluster CA with ClientAuth VerifyClientCertIfGiven
	// (pki.CA.ServerTLS), so a node's client certificate authenticates it
	// and a bearer token still does for everyone else. Required to Listen
	// or Run: the API is served over HTTPS only, and a plain-HTTP request
	// gets Go's 400 "Client sent an HTTP request to an HTTPS server" and no
	// API data. nil is fine for Handler alone (tests with httptest).
	TLS *tls.Config
	// AgentTLS is how the server reaches the agents (pods' logs, exec,
	// port-forward, nodes/proxy): the cluster CA in RootCAs, so an agent's
	// serving certificate is verified, and the API server's client
	// certificate (CN kube-apiserver-kubelet-client, O system:masters),
	// which the agents require. nil: the proxy cannot reach agents and
	// says so (tests of the API alone).
	AgentTLS *tls.Config
	// Token is the bearer token every request except /healthz, /readyz and
	// /version must carry. Required: see LoadOrCreateToken.
	Token string
	// TokenAuthenticators check the bearer tokens that are not Token, in
	// order (the first that recognizes a token decides; ServiceAccount
	// tokens are one). A request may also authenticate with a TLS client
	// certificate signed by the cluster CA (authn.go).
	TokenAuthenticators []TokenAuthenticator
	// MaxRequestBytes bounds a request body of any content type (an
	// object, a patch, DeleteOptions); larger ones get 413 "Request entity
	// too large: limit is N" and change nothing.
	MaxRequestBytes int64
	// MaxReadOnlyInflight bounds the read requests (GET, HEAD) served at
	// once, kube-apiserver's --max-requests-inflight; MaxMutatingInflight
	// the others (POST, PUT, PATCH, DELETE), its
	// --max-mutating-requests-inflight. One past the limit is answered at
	// once with 429 and "Retry-After: 1" (inflight.go). Long-running
	// requests (watches, logs, exec, port-forward, proxy, snapshots) are
	// not counted. 0 means no limit, as in kube-apiserver.
	MaxReadOnlyInflight int
	MaxMutatingInflight int
	// RequestTimeout bounds a request that is not long-running: past it
	// the client gets 504 "Timeout: request did not complete within the
	// allotted timeout" and its slot is freed once the handler stops
	// (kube-apiserver's --request-timeout). It also bounds how long the
	// server waits for the request's body.
	RequestTimeout time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers, counted from its first byte (or from the
	// connection for the first request); then the connection is closed.
	// It is what stops a slow-loris client from holding connections by
	// dribbling a header a byte at a time.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; more is 431.
	MaxHeaderBytes int
	// MaxWatchTimeout ends a watch stream after this long even when the
	// client asked for longer (the client then resumes from its last
	// resourceVersion). It keeps forgotten streams from living forever.
	MaxWatchTimeout time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight requests
	// after its ctx ends.
	ShutdownTimeout time.Duration
	// Authorization is the authorization mode after system:masters and the
	// Node authorizer: AuthorizationRBAC (""; the default, always in the
	// product) or AuthorizationAlwaysAllow, every authenticated user may
	// do everything (kube-apiserver's AlwaysAllow): only the benchmark
	// that measures what RBAC costs sets it (docs/performance.md).
	Authorization string
	// Version is reported by GET /version.
	Version string
	// Metrics receives the request metrics and is served at /metrics; nil
	// means a registry of the server's own. Pass a shared one to expose the
	// controllers' metrics at the same endpoint.
	Metrics *metrics.Metrics
	// Skiff serves the skiff-only paths under /skiff/ (the control
	// plane's join and leader endpoints), behind the token check like
	// every API path; nil answers them 404.
	Skiff http.Handler
	// Bootstrap serves the paths under BootstrapPrefix (/skiff/v1/bootstrap/)
	// WITHOUT the API's authentication: what a machine needs before it has
	// a credential (the cluster CA, public; a node's certificates, for
	// the join token, which the handler checks itself). nil answers them
	// like any other path.
	Bootstrap http.Handler
	// Dashboard serves the web dashboard (package dashboard): the paths
	// under DashboardPrefix BEFORE the API's authentication (the
	// dashboard checks its own session cookie and answers 401 without
	// one), and those under DashboardLoginCodePrefix after authentication
	// and authorization like any API path (only system:masters may get a
	// one-time login code; the session then carries that user, see
	// UserFrom). nil answers them like any other path.
	Dashboard http.Handler
	// PodSecurity configures Pod Security admission
	// (admission_podsecurity.go): the levels of the namespaces without
	// pod-security.kubernetes.io labels and the exempt namespaces. nil is
	// DefaultPodSecurity(): baseline, kube-system exempt. New refuses an
	// invalid one.
	PodSecurity *PodSecurityConfig
	// MetricsAdapterConfig is the custom and external metrics APIs' rule
	// file, in prometheus-adapter's --config format (adapter_config.go);
	// nil is DefaultAdapterConfig. New refuses what it cannot evaluate.
	MetricsAdapterConfig []byte
}

// The dashboard's paths (Config.Dashboard; dashboard.Prefix and
// dashboard.LoginCodePath).
const (
	DashboardPrefix          = "/dashboard/"
	DashboardLoginCodePrefix = "/skiff/v1/dashboard/"
)

// DefaultConfig returns the defaults, each with its reason.
func DefaultConfig() Config {
	return Config{
		// Loopback only: exposing the API to the lab network is an
		// explicit choice (--listen 0.0.0.0:7443). 7443 avoids 6443, which
		// a real Kubernetes on the same lab machine may already use.
		Listen: "127.0.0.1:7443",
		// 3 MiB, as Kubernetes: bigger than any sane object (etcd's value
		// limit is 1.5 MiB), small enough that a bad client cannot make us
		// buffer much.
		MaxRequestBytes: 3 << 20,
		// kube-apiserver's defaults: enough for a lab room of agents and
		// controllers (each holds a request for a millisecond or so), few
		// enough that a runaway client gets 429s before the store queues
		// grow without bound. Reads are cheaper than writes, hence twice.
		MaxReadOnlyInflight: 400,
		MaxMutatingInflight: 200,
		// 60 seconds, kube-apiserver's --request-timeout default: a store
		// write takes milliseconds, so a request this slow is stuck, and
		// holding its client (and its in-flight slot) longer helps nobody.
		RequestTimeout: time.Minute,
		// A client on the lab network sends its headers in milliseconds;
		// 10 s forgives a slow link and still ends a slow-loris connection
		// quickly (kube-apiserver uses 32 s).
		ReadHeaderTimeout: 10 * time.Second,
		// 90 seconds, as kube-apiserver: it matches the keep-alive of Go's
		// http.DefaultTransport, so clients do not race the server's close.
		IdleTimeout: 90 * time.Second,
		// 1 MiB, as kube-apiserver (and Go's default).
		MaxHeaderBytes: 1 << 20,
		// 30 minutes, kube-apiserver's --min-request-timeout default.
		MaxWatchTimeout: 30 * time.Minute,
		// Long enough for a group commit to land, short enough for Ctrl-C.
		ShutdownTimeout: 5 * time.Second,
		Version:         "dev",
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: want host:port: %w", c.Listen, err))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("token: required (see LoadOrCreateToken)"))
	}
	if c.Authorization != AuthorizationRBAC && c.Authorization != AuthorizationAlwaysAllow {
		errs = append(errs, fmt.Errorf("authorization %q: want %q or %q", c.Authorization, AuthorizationRBAC, AuthorizationAlwaysAllow))
	}
	if c.MaxRequestBytes <= 0 {
		errs = append(errs, fmt.Errorf("max request bytes %d: must be positive", c.MaxRequestBytes))
	}
	if c.MaxReadOnlyInflight < 0 {
		errs = append(errs, fmt.Errorf("max read-only inflight %d: must not be negative (0 is no limit)", c.MaxReadOnlyInflight))
	}
	if c.MaxMutatingInflight < 0 {
		errs = append(errs, fmt.Errorf("max mutating inflight %d: must not be negative (0 is no limit)", c.MaxMutatingInflight))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: must be positive", c.RequestTimeout))
	}
	if c.ReadHeaderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("read header timeout %v: must be positive", c.ReadHeaderTimeout))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v: must be positive", c.IdleTimeout))
	}
	if c.MaxHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("max header bytes %d: must be positive", c.MaxHeaderBytes))
	}
	if c.MaxWatchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("max watch timeout %v: must be positive", c.MaxWatchTimeout))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %v: must not be negative", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
