package controlplane

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/internal/atomicfile"
	"skiff.dev/skiff/pki"
)

// # Joining with a pinned CA
//
// The API server serves HTTPS only, with a certificate of the cluster CA
// (DATA-DIR/pki). A machine that joins knows neither the CA nor has a
// credential; it holds two things the teacher gave it, as with kubeadm
// join: the join token (DATA-DIR/join-token, which also keys gossip) and
// the CA's pin (`--discovery-token-ca-cert-hash sha256:...`, pki.CA.Hash).
//
//  1. It fetches the CA without trusting anyone: GET CAPath over TLS
//     without verification (FetchCA). The answer is public.
//  2. It checks the CA against the pin and refuses to go on when it does
//     not match (someone else answered); only
//     --discovery-token-unsafe-skip-ca-verification skips this, as kubeadm.
//  3. From then on it verifies the server against that CA, as every
//     client does, and asks for its credentials with the join token:
//     POST NodeCredentialsPath(NAME) {"addresses": [...]} answers the CA,
//     the node's client certificate (CN system:node:NAME, O
//     system:nodes) and its agent's serving certificate (server usage
//     only; SANs: the node's name and the addresses, pki.NodeServingLeaf)
//     with their keys (RequestNodeCredentials). The node keeps them in
//     its data dir (pki.NodeDir) and reuses them after a restart.
//
// Unlike kubeadm the server makes the node's keys (no CSR): the answer
// travels over TLS verified against the pinned CA. A join token holder
// may ask for any node name, as a kubeadm bootstrap token may (and so
// take over an existing node's name); keep the token as secret as the
// admin token. What it cannot get is a certificate that passes for an
// API server: the agent's serving certificate is signed by the CA every
// kubeconfig and pod trusts, so the addresses must be IP addresses, and
// neither they nor the name may be one the API server is reached at
// (checkNodeCredentialsRequest). The API server verifies an agent's
// certificate for the node's InternalIP when it proxies logs and exec.
//
// A server joining an embedded etcd cluster (--join-server) pins the CA
// the same way, then fetches the cluster's secrets with the admin token:
// GET SecretsPath answers ca.crt, ca.key, sa.key (when it exists) and the
// join token, which it installs in its own data dir before it starts.

// JoinTokenFile is the join token's file in the data dir.
const JoinTokenFile = "join-token"

// Paths of the bootstrap API (apiserver.Config.Bootstrap: served before
// authentication) and of the secrets a joining server fetches (behind
// the admin token, like every /skiff/ path).
const (
	CAPath      = apiserver.BootstrapPrefix + "ca"
	nodesPath   = apiserver.BootstrapPrefix + "nodes/"
	SecretsPath = "/skiff/v1/cluster/secrets"
)

// NodeCredentialsPath is where a node asks for its certificates.
func NodeCredentialsPath(name string) string { return nodesPath + name }

// NodeCredentialsRequest is the body of a node's credential request.
type NodeCredentialsRequest struct {
	// Addresses the API server reaches the node's agent at (IP
	// addresses, at most 16): the IP SANs of its serving certificate.
	Addresses []string `json:"addresses"`
}

// ClusterSecrets is what a joining server receives (SecretsPath).
type ClusterSecrets struct {
	CACert    []byte `json:"caCert"`
	CAKey     []byte `json:"caKey"`
	SAKey     []byte `json:"saKey,omitempty"`
	JoinToken string `json:"joinToken"`
}

// maxNodeAddresses bounds a credential request's SANs.
const maxNodeAddresses = 16

// bootstrapHandler serves CAPath and NodeCredentialsPath.
func (cp *ControlPlane) bootstrapHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CAPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(cp.ca.CertPEM())
	})
	mux.HandleFunc("POST "+nodesPath+"{name}", cp.serveNodeCredentials)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteStatus(w, strategy.NotFoundPath())
	})
	return mux
}

func (cp *ControlPlane) serveNodeCredentials(w http.ResponseWriter, r *http.Request) {
	tok, _ := apiserver.BearerToken(r)
	if subtle.ConstantTimeCompare([]byte(tok), []byte(cp.joinToken)) != 1 {
		api.WriteStatus(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized: the join token is wrong (use the one in the server's DATA-DIR/join-token)"))
		return
	}
	name := r.PathValue("name")
	var req NodeCredentialsRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
	if err == nil {
		err = api.UnmarshalStrict(body, &req)
	}
	if err != nil {
		api.WriteStatus(w, api.NewBadRequest(fmt.Sprintf("decode node credentials request: %v", err)))
		return
	}
	remote, _, _ := net.SplitHostPort(r.RemoteAddr)
	invalid, forbidden := checkNodeCredentialsRequest(name, req, apiserver.IsLocalAddress(remote), cp.serverHosts())
	if len(invalid) > 0 {
		api.WriteStatus(w, api.NewBadRequest("node credentials request: "+errorList(invalid)))
		return
	}
	if len(forbidden) > 0 {
		api.WriteStatus(w, api.NewStatusError(http.StatusForbidden, api.ReasonForbidden, "node credentials request: "+errorList(forbidden)))
		return
	}
	nc, err := cp.ca.IssueNode(name, req.Addresses)
	if err != nil {
		api.WriteStatus(w, api.NewInternal(err))
		return
	}
	cp.log.Info("issued node credentials", "node", name, "addresses", req.Addresses, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(nc)
}

// serverHosts says whether a name or IP address is one an API server of
// this cluster is reached at: any name or address this server's serving
// certificate holds (servingLeaf: the kubernetes names, the hostname,
// localhost, its addresses, the kubernetes Service IP), the kubernetes
// Service IP of the registry and the hosts of the API servers gossip
// knows (the other servers of an embedded etcd cluster).
func (cp *ControlPlane) serverHosts() func(host string) bool {
	var cert *x509.Certificate
	if t := cp.cfg.API.TLS; t != nil && len(t.Certificates) > 0 {
		cert = t.Certificates[0].Leaf
		if cert == nil && len(t.Certificates[0].Certificate) > 0 {
			cert, _ = x509.ParseCertificate(t.Certificates[0].Certificate[0])
		}
	}
	var others []string
	if cp.server != nil {
		others = append(others, cp.server.Registry().KubernetesServiceIP())
	}
	servers := []string{cp.advURL}
	if cp.gossip != nil {
		servers = append(servers, cp.gossip.APIServers()...)
	}
	for _, s := range servers {
		if u, err := parseHTTPURL(s); err == nil {
			others = append(others, u.Hostname())
		}
	}
	return func(host string) bool {
		if cert != nil && cert.VerifyHostname(host) == nil {
			return true
		}
		ip := net.ParseIP(host)
		for _, o := range others {
			if strings.EqualFold(o, host) || (ip != nil && ip.Equal(net.ParseIP(o))) {
				return true
			}
		}
		return false
	}
}

// checkNodeCredentialsRequest checks a credential request for node name
// from remote. invalid is bad input (400): a name that is no DNS
// subdomain, more than maxNodeAddresses addresses, an address that is no
// IP address (a node's serving certificate names no DNS name but the
// node's) or one no node is reached at (0.0.0.0, multicast). forbidden
// (403) are the names and addresses that would let the certificate pass
// for an API server of the cluster (isServer, Service names under .svc):
// every kubeconfig and every pod trusts the cluster CA. A loopback
// address is a node's only when the request comes from the API server's
// own machine (local: from loopback or one of its addresses; an agent
// there that joins with --advertise-address 127.0.0.1); the nodes of
// `skiff up` get theirs without a request (IssueNodeCredentials).
func checkNodeCredentialsRequest(name string, req NodeCredentialsRequest, local bool, isServer func(string) bool) (invalid, forbidden field.ErrorList) {
	namePath := field.NewPath("name")
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		invalid = append(invalid, field.Invalid(namePath, name, msg))
	}
	addrsPath := field.NewPath("addresses")
	if len(req.Addresses) > maxNodeAddresses {
		invalid = append(invalid, field.TooMany(addrsPath, len(req.Addresses), maxNodeAddresses))
	}
	for i, a := range req.Addresses {
		ip := net.ParseIP(a)
		switch {
		case ip == nil:
			invalid = append(invalid, field.Invalid(addrsPath.Index(i), a, "must be an IP address (the node's serving certificate names no DNS name but the node's name)"))
		case ip.IsUnspecified() || ip.IsMulticast():
			invalid = append(invalid, field.Invalid(addrsPath.Index(i), a, "must be an address the node is reached at"))
		case ip.IsLoopback():
			if !local {
				forbidden = append(forbidden, field.Forbidden(addrsPath.Index(i), fmt.Sprintf("%s is a loopback address: only a node on the API server's own machine may name it", a)))
			}
		case isServer(a):
			forbidden = append(forbidden, field.Forbidden(addrsPath.Index(i), fmt.Sprintf("%s is an address of the API server: a node's serving certificate may not name it (an agent on the server's machine joins with --advertise-address 127.0.0.1)", a)))
		}
	}
	if len(invalid) > 0 {
		return invalid, nil
	}
	switch lower := strings.ToLower(name); {
	case isServer(name):
		forbidden = append(forbidden, field.Forbidden(namePath, fmt.Sprintf("%s is a name of the API server: a node's serving certificate may not name it (give the node another --node-name)", name)))
	case strings.HasSuffix(lower, ".svc") || strings.Contains(lower, ".svc."):
		forbidden = append(forbidden, field.Forbidden(namePath, fmt.Sprintf("%s is a Service's DNS name: a node's serving certificate may not name it (give the node another --node-name)", name)))
	}
	return nil, forbidden
}

// errorList joins field errors with "; ".
func errorList(errs field.ErrorList) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// serveSecrets answers SecretsPath (behind the admin token).
func (cp *ControlPlane) serveSecrets(w http.ResponseWriter, r *http.Request) {
	key, err := cp.ca.KeyPEM()
	if err != nil {
		api.WriteStatus(w, api.NewInternal(err))
		return
	}
	cs := ClusterSecrets{CACert: cp.ca.CertPEM(), CAKey: key, JoinToken: cp.joinToken}
	if b, err := os.ReadFile(filepath.Join(cp.cfg.DataDir, "pki", pki.ServiceAccountKeyFile)); err == nil {
		cs.SAKey = b
	}
	cp.log.Info("handed the cluster secrets to a joining server", "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cs)
}

// ErrCAHash is a CA that does not match the pin given.
var ErrCAHash = errors.New("the server's CA does not match --discovery-token-ca-cert-hash")

// FetchCA fetches the cluster CA from the API server at server without
// verifying the server (it has no CA yet), and checks it against pin
// ("sha256:HEX"). skipVerify accepts any CA without a pin (kubeadm's
// --discovery-token-unsafe-skip-ca-verification); without it a missing
// pin is an error.
func FetchCA(ctx context.Context, server, pin string, skipVerify bool) (*pki.CA, error) {
	if pin == "" && !skipVerify {
		return nil, errors.New("no --discovery-token-ca-cert-hash: give the sha256:... pin `skiff server` printed (or, on a trusted network only, --discovery-token-unsafe-skip-ca-verification)")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// Nothing to verify the chain against yet: the pin below is the
		// check, and checkServerCert after it. A server whose certificate
		// does not even claim to be an API server's is refused in the
		// handshake, before any request.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // checked against the pin
			VerifyConnection: func(cs tls.ConnectionState) error { return pki.VerifyAPIServer(cs.PeerCertificates) }},
		ForceAttemptHTTP2: false,
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+CAPath, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch the cluster CA from %s: %w", server, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the cluster CA from %s: %w", server, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the cluster CA from %s: %s: %s", server, resp.Status, bytes.TrimSpace(body))
	}
	ca, err := pki.FromPEM(body)
	if err != nil {
		return nil, fmt.Errorf("fetch the cluster CA from %s: %w", server, err)
	}
	if pin != "" {
		if err := ca.CheckHash(pin); err != nil {
			return nil, fmt.Errorf("%w: %w (is %s really the cluster's server?)", ErrCAHash, err, server)
		}
	}
	// The CA is public: anyone can hand it out. The server that did must
	// also hold an API server's certificate of it.
	if err := checkServerCert(resp.TLS, ca, req.URL.Hostname()); err != nil {
		return nil, fmt.Errorf("fetch the cluster CA from %s: %w", server, err)
	}
	return ca, nil
}

// checkServerCert verifies the certificate a server presented on a
// connection made without verification: signed by ca, valid for host, an
// API server's (pki.IsAPIServer).
func checkServerCert(cs *tls.ConnectionState, ca *pki.CA, host string) error {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, DNSName: host,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the server's certificate: %w", err)
	}
	return pki.VerifyAPIServer(cs.PeerCertificates)
}

// RequestNodeCredentials asks the API server at server (verified against
// ca) for the certificates of node name reached at addrs, with the join
// token.
func RequestNodeCredentials(ctx context.Context, server string, ca *pki.CA, joinToken, name string, addrs []string) (pki.NodeCredentials, error) {
	var nc pki.NodeCredentials
	body, err := json.Marshal(NodeCredentialsRequest{Addresses: addrs})
	if err != nil {
		return nc, err
	}
	if err := postJSON(ctx, server, ca, joinToken, http.MethodPost, NodeCredentialsPath(name), body, &nc); err != nil {
		return nc, fmt.Errorf("request node credentials from %s: %w", server, err)
	}
	if err := nc.Check(name, addrs, time.Now()); err != nil {
		return nc, fmt.Errorf("request node credentials from %s: the answer does not fit: %w", server, err)
	}
	if !bytes.Equal(bytes.TrimSpace(nc.CA), bytes.TrimSpace(ca.CertPEM())) {
		return nc, fmt.Errorf("request node credentials from %s: the answer names another CA", server)
	}
	return nc, nil
}

// fetchSecrets installs the cluster secrets of the server at server into
// dataDir (a joining server): pins the CA, then fetches them with the
// admin token. A data dir that already holds the CA (a restart) is left
// alone.
func fetchSecrets(ctx context.Context, dataDir, server, adminToken, pin string, skipVerify bool) error {
	pkiDir := filepath.Join(dataDir, "pki")
	if _, err := os.Stat(filepath.Join(pkiDir, pki.CACertFile)); err == nil {
		return nil
	}
	ca, err := FetchCA(ctx, server, pin, skipVerify)
	if err != nil {
		return err
	}
	var cs ClusterSecrets
	if err := postJSON(ctx, server, ca, adminToken, http.MethodGet, SecretsPath, nil, &cs); err != nil {
		return fmt.Errorf("fetch the cluster secrets from %s: %w", server, err)
	}
	if err := pki.WriteCA(pkiDir, cs.CACert, cs.CAKey); err != nil {
		return err
	}
	if len(cs.SAKey) > 0 {
		if err := atomicfile.WriteFile(filepath.Join(pkiDir, pki.ServiceAccountKeyFile), cs.SAKey, 0o600); err != nil {
			return fmt.Errorf("install sa.key: %w", err)
		}
	}
	if cs.JoinToken == "" {
		return fmt.Errorf("fetch the cluster secrets from %s: no join token in the answer", server)
	}
	return saveTokenFile(filepath.Join(dataDir, JoinTokenFile), cs.JoinToken)
}

// postJSON sends a request to server (verified against ca) with a bearer
// token and decodes the JSON answer into out.
func postJSON(ctx context.Context, server string, ca *pki.CA, token, method, path string, body []byte, out any) error {
	hc, err := client.Config{Server: server, CAData: ca.CertPEM()}.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(server, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var st api.Status
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, st.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// saveTokenFile writes a token received from another server; an existing
// file that differs is an error (the data dir belongs to another cluster).
func saveTokenFile(path, token string) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if strings.TrimSpace(string(b)) != token {
			return fmt.Errorf("data dir %s holds the %s of another cluster: use another --data-dir", filepath.Dir(path), filepath.Base(path))
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := atomicfile.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("save %s: %w", filepath.Base(path), err)
	}
	return nil
}

// servingLeaf is the API server's serving certificate: every address it
// is reached at (the listen host, or every address of this machine when
// it listens on all; the advertised ones), localhost, 127.0.0.1, the
// hostname, the `kubernetes` Service IP and its DNS names.
func servingLeaf(listen string, advertised ...string) pki.Leaf {
	hosts := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if p, err := netip.ParsePrefix(apiserver.DefaultServiceCIDR); err == nil {
		hosts = append(hosts, p.Masked().Addr().Next().String()) // 10.96.0.1
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	} else {
		hosts = append(hosts, host)
	}
	for _, a := range advertised {
		if u, err := parseHTTPURL(a); err == nil {
			a = u.Hostname()
		}
		hosts = append(hosts, a)
	}
	dns, ips := pki.ServingNames(hosts...)
	return pki.APIServerLeaf(pki.Leaf{DNSNames: dns, IPs: ips})
}
