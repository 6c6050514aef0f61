package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

// Config tells a client where the API server is and how to authenticate.
// The CLI reads it from a kubeconfig (kubeconfig.go: LoadKubeconfig), the
// file `skiff up` and `skiff server` write and kubectl reads too.
//
// A cluster of several servers (embedded etcd) lists the others too; the
// client talks to Server first and moves to the next one when a server
// cannot be reached (in a kubeconfig: the cluster extension ServersExtension).
type Config struct {
	// Server is the API server's base URL, e.g. "https://127.0.0.1:7443".
	// A bare "host:port" means https.
	Server string
	// Servers are more API servers of the same cluster, tried in order
	// after Server when it cannot be reached. Optional.
	Servers []string
	// Token is the bearer token to send (the admin token, a service
	// account's); "" sends none (a node authenticates with its certificate).
	Token string
	// CAData is the PEM certificate of the cluster CA the servers'
	// certificates must chain to (kubeconfig's
	// certificate-authority-data); nil trusts the system's roots.
	CAData []byte
	// CertData and KeyData are a client certificate and its key, PEM
	// (kubeconfig's client-certificate-data, client-key-data): a node's
	// credential, a user's. Both or neither.
	CertData, KeyData []byte
	// UserAgent is sent with every request; "" sends UserAgent("skiff").
	// The API server names a write's field manager after it (up to its
	// first '/'), as kube-apiserver does: "skiff", "skiff-agent".
	UserAgent string
	// Namespace is the kubeconfig context's namespace ("" when it names
	// none): the CLI's default for -n.
	Namespace string
	// Impersonate and ImpersonateGroups act as another user (kubectl's
	// --as and --as-group): sent as Impersonate-User and
	// Impersonate-Group on every request; the server checks that the
	// credential may impersonate them.
	Impersonate       string
	ImpersonateGroups []string
}

// UserAgent is a User-Agent in kubectl's shape: "skiff/v0.1.0 (linux/amd64)".
func UserAgent(program string) string {
	return fmt.Sprintf("%s/%s (%s/%s)", program, api.Version, runtime.GOOS, runtime.GOARCH)
}

// Validate reports what is wrong with a config.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Server) == "" {
		errs = append(errs, errors.New("server: required (the API server address, e.g. https://127.0.0.1:7443)"))
	}
	for i, s := range c.Servers {
		if strings.TrimSpace(s) == "" {
			errs = append(errs, fmt.Errorf("servers[%d]: empty", i))
		}
	}
	if c.Impersonate == "" && len(c.ImpersonateGroups) > 0 {
		errs = append(errs, errors.New("impersonating groups without a user: give --as too"))
	}
	if (len(c.CertData) == 0) != (len(c.KeyData) == 0) {
		errs = append(errs, errors.New("client certificate and key: give both or neither"))
	}
	if len(c.CAData) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CAData) {
		errs = append(errs, errors.New("certificate authority data: no PEM certificate in it"))
	}
	return errors.Join(errs...)
}

// TLSConfig is the TLS configuration the config asks for: the servers
// verified against CAData (the system's roots without it), the client
// certificate presented when there is one. With CAData (a skiff cluster's
// CA) a server must also prove it is an API server (pki.VerifyAPIServer):
// the cluster CA signs the agents' serving certificates too, and anyone
// with the join token can get one, so chain and host name are not enough.
// The check runs in the handshake, before the client sends its
// certificate or any request: a refused server sees no token.
func (c Config) TLSConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(c.CAData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.CAData) {
			return nil, errors.New("certificate authority data: no PEM certificate in it")
		}
		tc.RootCAs = pool
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			return pki.VerifyAPIServer(cs.PeerCertificates)
		}
	}
	if len(c.CertData) > 0 || len(c.KeyData) > 0 {
		cert, err := tls.X509KeyPair(c.CertData, c.KeyData)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// HTTPClient is an HTTP client with the config's TLS, speaking HTTP/1.1
// (connection upgrades: exec, port-forward), without an overall timeout.
// It sends no token: callers that need one set it per request.
func (c Config) HTTPClient() (*http.Client, error) {
	tr, err := c.transport()
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr}, nil
}

// transport is the HTTP transport of the config: its TLS, HTTP/1.1 (a
// custom TLS config and no ForceAttemptHTTP2), connections kept for
// reuse.
func (c Config) transport() (*http.Transport, error) {
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.ForceAttemptHTTP2 = false
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.MaxIdleConnsPerHost = 64 // controllers, the scheduler and the agent share one client
	return tr, nil
}

type fieldManagerKey struct{}

// WithFieldManager returns ctx whose writes (create, update, patch) name
// manager as their field manager (?fieldManager=), as kubectl's
// client-side apply names itself "kubectl-client-side-apply"; without it
// the API server takes the User-Agent's first word ("skiff").
func WithFieldManager(ctx context.Context, manager string) context.Context {
	return context.WithValue(ctx, fieldManagerKey{}, manager)
}

// FieldManager is the field manager WithFieldManager put on ctx, or "".
func FieldManager(ctx context.Context) string {
	m, _ := ctx.Value(fieldManagerKey{}).(string)
	return m
}

// CheckServer completes a TLS handshake with the API server at server (a
// URL or host:port) with the config's TLS and sends nothing: nil when it
// is an API server of the cluster (chain, host name, pki.APIServerURI).
// An agent checks each server gossip names before it uses it.
func (c Config) CheckServer(ctx context.Context, server string) error {
	u, err := parseServer(server)
	if err != nil {
		return err
	}
	if len(c.CAData) == 0 {
		return fmt.Errorf("check API server %s: no cluster CA to check it against", server)
	}
	tc, err := Config{CAData: c.CAData}.TLSConfig()
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	d := &tls.Dialer{Config: tc, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("check API server %s: %w", server, err)
	}
	return conn.Close()
}

// IsNotAPIServer reports whether err (of CheckServer, or of a request)
// means the server answered but is not an API server of the cluster: its
// certificate is not of the cluster CA, names another host, or is not an
// API server's (pki.ErrNotAPIServer).
func IsNotAPIServer(err error) bool {
	var ve *tls.CertificateVerificationError
	return errors.Is(err, pki.ErrNotAPIServer) || errors.As(err, &ve)
}
