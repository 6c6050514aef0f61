package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/backoff"
	"skiff.dev/skiff/pki"
)

// # Several servers: etcd
//
// With EtcdConfig the store is etcd, not bbolt, and several servers serve
// one cluster, as k3s does:
//
//   - `skiff server --cluster-init` starts the first member of an
//     embedded etcd (data in DATA-DIR/etcd);
//   - `skiff server --join-server URL --token-file F
//     --discovery-token-ca-cert-hash sha256:...` first pins the cluster
//     CA and fetches the cluster's secrets (bootstrap.go: ca.crt, ca.key,
//     sa.key, the join token), then asks the API server at URL (POST
//     /skiff/v1/etcd/members, with the admin token like every API call)
//     to add this server as an etcd member, a learner; the answer
//     is the member list to start with, and this server then starts its
//     own member (state "existing") and asks for its promotion to a
//     voting member (POST api.MemberPath(name)+"/promote") once it has caught
//     up. The cluster keeps its majority throughout: a learner does not
//     vote. `skiff server remove-member NAME` (DELETE api.MemberPath(name))
//     takes a lost server's member out;
//   - `skiff server --etcd-endpoints a,b` uses an external etcd: no member
//     of its own.
//
// Each server records its API URL and gossip address in etcd (key
// ServersPrefix+name) and, once its store is up, joins the gossip of the
// others listed there: a server restarted with its data dir finds the
// cluster again without being told where it is.
//
// Every server serves the API; the scheduler and the controllers run on
// the elected leader only (package controlplane/election). etcd's peer
// and client traffic is TLS with the cluster CA (https:// URLs;
// etcd.ServerTLS): each server's member has a certificate named
// pki.EtcdCommonName, which no node or user certificate can carry, and
// etcd refuses a peer or client without one.
//
// What stays per server, in memory, with several servers:
//   - pod traces (`skiff trace pod`, GET/POST pods/NAME/trace): each API
//     server keeps, in memory, the spans posted to it (at most
//     apiserver.MaxTracedPods pods) and answers from those alone. The API
//     server's own "create" span is on the server the pod was created
//     through; the scheduler's are on the leader (it posts through its
//     in-process client); each agent's on the server it talks to (the one
//     it joined through until that one stops answering). So a trace read
//     from one server may miss steps, or be empty, and a server restarted
//     has none; `skiff trace` says which server answered when it finds
//     none. Nothing of a trace is in the store or in a snapshot.
//   - an autoscaler's decisions (`skiff trace hpa/NAME`, describe hpa's
//     skiff section: GET/POST horizontalpodautoscalers/NAME/trace) are
//     posted by the leader's controller to the leader's API server only,
//     the same way; a new leader starts with none.
//
// What is shared, through the store:
//   - Service cluster IPs and node ports: a Service write reserves the
//     addresses it needs in the store's ServiceAllocation object with a
//     compare-and-swap before storing the Service (apiserver's
//     allocate_service.go), so two Services created at once through two
//     servers never get one address;
//   - watch history for resume is the store's (etcd's), shared by all.

// EtcdConfig chooses etcd as the store. Exactly one of ClusterInit,
// JoinServer and Endpoints is set.
type EtcdConfig struct {
	// ClusterInit starts the first member of a new embedded etcd cluster
	// (or restarts this server's member when DATA-DIR/etcd holds one).
	ClusterInit bool
	// JoinServer is the API server URL of a server of the cluster to join;
	// the request carries the admin token (Config.API.Token, required).
	// When DATA-DIR/etcd already holds a member (a restart), it is not
	// asked again: the member restarts from its data.
	JoinServer string
	// Endpoints are the client URLs of an external etcd.
	Endpoints []string
	// Name of the embedded member; "" takes the gossip member name (or
	// the API listen address without gossip).
	Name string
	// PeerListen is the URL the embedded member listens on for peers;
	// PeerAdvertise the one the others reach it at ("" = PeerListen).
	PeerListen, PeerAdvertise string
	// ClientListen is the URL the embedded member serves clients on: this
	// server's own store and election.
	ClientListen string
	// LeaderLeaseTTL is how long a dead leader keeps the leadership.
	LeaderLeaseTTL time.Duration
	// CACertHash pins the cluster CA of JoinServer ("sha256:HEX", as
	// `skiff server` prints it); required with JoinServer unless
	// UnsafeSkipCAVerification.
	CACertHash               string
	UnsafeSkipCAVerification bool
}

// DefaultEtcdConfig returns the defaults of an embedded member.
func DefaultEtcdConfig() *EtcdConfig {
	return &EtcdConfig{
		// etcd's own ports, on loopback: a lab machine runs one server; on
		// one machine (tests, a demo) each server takes other ports.
		PeerListen:   "https://127.0.0.1:2380",
		ClientListen: "https://127.0.0.1:2379",
		// 5 s: failover within seconds, and 2/3 of it (the time a leader
		// waits without a renewal before it steps down) stays well above
		// the stalls of a busy lab machine (an fsync, a GC pause), so a
		// healthy leader is not deposed.
		LeaderLeaseTTL: 5 * time.Second,
	}
}

// embedded reports whether this server runs an etcd member.
func (c *EtcdConfig) embedded() bool { return c != nil && len(c.Endpoints) == 0 }

// validate reports every problem at once; token is the cluster token given.
func (c *EtcdConfig) validate(token string) []error {
	var errs []error
	n := 0
	for _, set := range []bool{c.ClusterInit, c.JoinServer != "", len(c.Endpoints) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		errs = append(errs, errors.New("etcd: one of --cluster-init, --join-server or --etcd-endpoints is required"))
	case n > 1:
		errs = append(errs, errors.New("etcd: --cluster-init, --join-server and --etcd-endpoints exclude each other: choose one"))
	}
	if c.JoinServer != "" {
		if _, err := parseHTTPURL(c.JoinServer); err != nil {
			errs = append(errs, fmt.Errorf("--join-server: %w", err))
		}
		if token == "" {
			errs = append(errs, errors.New("--join-server needs the admin token: --token-file (the first server's DATA-DIR/token) or $SKIFF_TOKEN"))
		}
		if c.CACertHash == "" && !c.UnsafeSkipCAVerification {
			errs = append(errs, errors.New("--join-server needs --discovery-token-ca-cert-hash sha256:... (the first server printed it) or --discovery-token-unsafe-skip-ca-verification"))
		}
	}
	for i, ep := range c.Endpoints {
		if _, err := parseHTTPURL(ep); err != nil {
			errs = append(errs, fmt.Errorf("--etcd-endpoints[%d]: %w", i, err))
		}
	}
	if c.embedded() {
		for _, f := range []struct{ name, v string }{{"--etcd-peer-listen", c.PeerListen}, {"--etcd-client-listen", c.ClientListen}} {
			if err := checkEtcdURL(f.v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			}
		}
		if c.PeerAdvertise != "" {
			if err := checkEtcdURL(c.PeerAdvertise); err != nil {
				errs = append(errs, fmt.Errorf("etcd peer advertise URL: %w", err))
			}
		}
	}
	if c.LeaderLeaseTTL < 2*time.Second {
		errs = append(errs, fmt.Errorf("--leader-lease-ttl %v: want at least 2s (etcd's shortest lease)", c.LeaderLeaseTTL))
	}
	return errs
}

// parseHTTPURL accepts http://host:port and https://host:port (the API
// servers are https, etcd's peer and client URLs http).
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want http://HOST:PORT", s)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("%q: want http://HOST:PORT (no port)", s)
	}
	return u, nil
}

// checkEtcdURL accepts an embedded member's URL: https://HOST:PORT. Its
// peer and client traffic is TLS with the cluster CA (etcd.ServerTLS).
func checkEtcdURL(s string) error {
	u, err := parseHTTPURL(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%q: want https://HOST:PORT (etcd's traffic between servers is TLS with the cluster CA)", s)
	}
	return nil
}

// memberDataExists reports whether dir already holds an etcd member (a
// restart: the member list is in its data, nothing is asked).
func memberDataExists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "member"))
	return err == nil
}

// errJoinBusy is a join the cluster cannot take yet (503: a member added
// a moment ago is still connecting).
var errJoinBusy = errors.New("the cluster cannot add a member yet")

// joinTimeout bounds how long a joining server keeps asking while the
// cluster is busy: a member added a moment ago needs a few seconds.
const joinTimeout = time.Minute

// requestJoinRetry is requestJoin, asked again every second while the
// cluster answers busy, up to joinTimeout.
func requestJoinRetry(ctx context.Context, base, token string, ca *pki.CA, req api.JoinRequest, lg *slog.Logger) (api.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	var jr api.JoinResponse
	err := busyRetry().Retry(ctx, func(err error) bool { return errors.Is(err, errJoinBusy) },
		func(err error) {
			lg.Info("the cluster cannot add this member yet; asking again", "through", base, "err", err)
		},
		func(ctx context.Context) (err error) {
			jr, err = requestJoin(ctx, base, token, ca, req)
			return err
		})
	return jr, err
}

// busyRetry is how a server asks again while the cluster answers busy
// (503: etcd takes one new member at a time, a few seconds apart): once a
// second.
func busyRetry() *backoff.Backoff {
	return &backoff.Backoff{Policy: backoff.Policy{Initial: time.Second, Max: time.Second}}
}

// requestJoin posts a api.JoinRequest to the server at base (verified
// against ca).
func requestJoin(ctx context.Context, base, token string, ca *pki.CA, req api.JoinRequest) (api.JoinResponse, error) {
	hc, err := client.Config{Server: base, CAData: ca.CertPEM()}.HTTPClient()
	if err != nil {
		return api.JoinResponse{}, fmt.Errorf("join %s: %w", base, err)
	}
	defer hc.CloseIdleConnections()
	body, err := json.Marshal(req)
	if err != nil {
		return api.JoinResponse{}, fmt.Errorf("join %s: %w", base, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+api.JoinPath, bytes.NewReader(body))
	if err != nil {
		return api.JoinResponse{}, fmt.Errorf("join %s: %w", base, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(hreq)
	if err != nil {
		return api.JoinResponse{}, fmt.Errorf("join %s: %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return api.JoinResponse{}, fmt.Errorf("join %s: the admin token was refused (use the first server's DATA-DIR/token)", base)
	case resp.StatusCode == http.StatusServiceUnavailable:
		return api.JoinResponse{}, fmt.Errorf("join %s: %w: %s", base, errJoinBusy, bytes.TrimSpace(data))
	case resp.StatusCode != http.StatusOK:
		return api.JoinResponse{}, fmt.Errorf("join %s: %s: %s", base, resp.Status, bytes.TrimSpace(data))
	}
	var jr api.JoinResponse
	if err := json.Unmarshal(data, &jr); err != nil {
		return api.JoinResponse{}, fmt.Errorf("join %s: decode answer: %w", base, err)
	}
	if jr.InitialCluster == "" {
		return api.JoinResponse{}, fmt.Errorf("join %s: the answer has no member list", base)
	}
	return jr, nil
}
