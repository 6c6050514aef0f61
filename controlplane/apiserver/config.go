package apiserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"skiff.dev/skiff/controlplane/metrics"
)

// Config of the HTTP server.
type Config struct {
	// Listen is the TCP address to serve on, host:port (port 0 picks a free one).
	Listen string
	// Token is the bearer token every request except /healthz, /readyz and
	// /version must carry. Required: see LoadOrCreateToken.
	Token string
	// MaxRequestBytes bounds a request body; larger ones get 413.
	MaxRequestBytes int64
	// MaxWatchTimeout ends a watch stream after this long even when the
	// client asked for longer (the client then resumes from its last
	// resourceVersion). It keeps forgotten streams from living forever.
	MaxWatchTimeout time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight requests
	// after its ctx ends.
	ShutdownTimeout time.Duration
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
}

// DefaultConfig returns the defaults, each with its reason.
func DefaultConfig() Config {
	return Config{
		// Loopback only: until TLS exists the token would cross the network
		// in clear text, so exposing the API is an explicit choice
		// (--listen 0.0.0.0:7443). 7443 avoids 6443, which a real
		// Kubernetes on the same lab machine may already use.
		Listen: "127.0.0.1:7443",
		// 3 MiB, as Kubernetes: bigger than any sane object (etcd's value
		// limit is 1.5 MiB), small enough that a bad client cannot make us
		// buffer much.
		MaxRequestBytes: 3 << 20,
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
	if c.MaxRequestBytes <= 0 {
		errs = append(errs, fmt.Errorf("max request bytes %d: must be positive", c.MaxRequestBytes))
	}
	if c.MaxWatchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("max watch timeout %v: must be positive", c.MaxWatchTimeout))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %v: must not be negative", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
