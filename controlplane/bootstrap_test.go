package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

// bootstrapCP is a control plane with just what the bootstrap API needs:
// the CA, the join token and a serving certificate of servingLeaf for a
// server listening on 10.1.2.3, advertised at 10.1.2.4.
func bootstrapCP(t *testing.T) *ControlPlane {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(servingLeaf("10.1.2.3:6443", "https://10.1.2.4:6443"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{ca: ca, joinToken: "join-secret", log: slog.New(slog.DiscardHandler), advURL: "https://10.9.9.9:6443"}
	cp.cfg.API.TLS = ca.ServerTLS(cert, false)
	return cp
}

func TestServeNodeCredentials(t *testing.T) {
	cp := bootstrapCP(t)
	hostname, err := os.Hostname()
	if err != nil || hostname == "" {
		t.Fatalf("hostname: %q %v", hostname, err)
	}
	many := make([]string, maxNodeAddresses+1)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.1.%d", i+1)
	}
	body := func(addrs ...string) string {
		b, _ := json.Marshal(NodeCredentialsRequest{Addresses: addrs})
		return string(b)
	}
	type testCase struct {
		name       string
		auth, node string
		body       string
		remote     string
		wantCode   int
		wantMsg    string   // in the Status message
		wantIPs    []string // the serving certificate's, on 200
	}
	tests := []testCase{
		{"a node at its address", "Bearer join-secret", "gpu-1", body("10.0.0.7"), "192.0.2.7:40000", 200, "", []string{"10.0.0.7"}},
		{"the scheme in any case", "bearer join-secret", "gpu-1", body("10.0.0.7"), "192.0.2.7:40000", 200, "", []string{"10.0.0.7"}},
		{"loopback from loopback", "Bearer join-secret", "gpu-1", body("127.0.0.1"), "127.0.0.1:40000", 200, "", []string{"127.0.0.1"}},
		{"wrong token", "Bearer nope", "gpu-1", body("10.0.0.7"), "192.0.2.7:40000", 401, "the join token is wrong", nil},
		{"no token", "", "gpu-1", body("10.0.0.7"), "192.0.2.7:40000", 401, "the join token is wrong", nil},
		{"bad node name", "Bearer join-secret", "GPU_1", body("10.0.0.7"), "192.0.2.7:40000", 400, `name: Invalid value: "GPU_1": a lowercase RFC 1123 subdomain`, nil},
		{"too many addresses", "Bearer join-secret", "gpu-1", body(many...), "192.0.2.7:40000", 400, "addresses: Too many: 17: must have at most 16 items", nil},
		{"a DNS name", "Bearer join-secret", "gpu-1", body("10.0.0.7", "gpu-1.lab"), "192.0.2.7:40000", 400, `addresses[1]: Invalid value: "gpu-1.lab": must be an IP address`, nil},
		{"the unspecified address", "Bearer join-secret", "gpu-1", body("0.0.0.0"), "192.0.2.7:40000", 400, `addresses[0]: Invalid value: "0.0.0.0": must be an address the node is reached at`, nil},
		{"an unknown field", "Bearer join-secret", "gpu-1", `{"addresses":["10.0.0.7"],"dnsNames":["kubernetes"]}`, "192.0.2.7:40000", 400, "dnsNames: unknown field", nil},
		{"not JSON", "Bearer join-secret", "gpu-1", `{"addresses":`, "192.0.2.7:40000", 400, "decode node credentials request", nil},
		{"the kubernetes Service IP", "Bearer join-secret", "gpu-1", body("10.96.0.1"), "192.0.2.7:40000", 403, "addresses[0]: Forbidden: 10.96.0.1 is an address of the API server", nil},
		{"the server's listen address", "Bearer join-secret", "gpu-1", body("10.0.0.7", "10.1.2.3"), "192.0.2.7:40000", 403, "addresses[1]: Forbidden: 10.1.2.3 is an address of the API server", nil},
		{"the server's advertised address", "Bearer join-secret", "gpu-1", body("10.1.2.4"), "192.0.2.7:40000", 403, "10.1.2.4 is an address of the API server", nil},
		{"another API server", "Bearer join-secret", "gpu-1", body("10.9.9.9"), "192.0.2.7:40000", 403, "10.9.9.9 is an address of the API server", nil},
		{"loopback from afar", "Bearer join-secret", "gpu-1", body("127.0.0.1"), "192.0.2.7:40000", 403, "127.0.0.1 is a loopback address", nil},
		{"IPv6 loopback from afar", "Bearer join-secret", "gpu-1", body("::1"), "192.0.2.7:40000", 403, "::1 is a loopback address", nil},
		{"named kubernetes", "Bearer join-secret", "kubernetes", body("10.0.0.7"), "192.0.2.7:40000", 403, "name: Forbidden: kubernetes is a name of the API server", nil},
		{"named kubernetes.default.svc", "Bearer join-secret", "kubernetes.default.svc", body("10.0.0.7"), "192.0.2.7:40000", 403, "kubernetes.default.svc is a name of the API server", nil},
		{"named localhost", "Bearer join-secret", "localhost", body("127.0.0.1"), "127.0.0.1:40000", 403, "localhost is a name of the API server", nil},
		{"named the server's address", "Bearer join-secret", "10.1.2.3", body("10.0.0.7"), "192.0.2.7:40000", 403, "10.1.2.3 is a name of the API server", nil},
		{"named after a Service", "Bearer join-secret", "web.default.svc.cluster.local", body("10.0.0.7"), "192.0.2.7:40000", 403, "is a Service's DNS name", nil},
	}
	if host := strings.ToLower(hostname); len(validation.IsDNS1123Subdomain(host)) == 0 {
		tests = append(tests, testCase{"named after the server's host", "Bearer join-secret", host, body("10.0.0.7"), "192.0.2.7:40000", 403, host + " is a name of the API server", nil})
	}
	if ip := localNonLoopbackIP(); ip != "" {
		tests = append(tests, testCase{"loopback from this machine's own address", "Bearer join-secret", "gpu-1", body("127.0.0.1"), net.JoinHostPort(ip, "40000"), 200, "", []string{"127.0.0.1"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, NodeCredentialsPath(tt.node), strings.NewReader(tt.body))
			req.RemoteAddr = tt.remote
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			cp.bootstrapHandler().ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if tt.wantCode != http.StatusOK {
				var st api.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatalf("answer %s: %v", rec.Body, err)
				}
				if !strings.Contains(st.Message, tt.wantMsg) || st.Code != int32(tt.wantCode) {
					t.Fatalf("Status %d %q, want %d with %q", st.Code, st.Message, tt.wantCode, tt.wantMsg)
				}
				return
			}
			var nc pki.NodeCredentials
			if err := json.Unmarshal(rec.Body.Bytes(), &nc); err != nil {
				t.Fatal(err)
			}
			serving := parseCert(t, nc.ServingCert)
			var ips []string
			for _, ip := range serving.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(serving.DNSNames, []string{tt.node}) || !slices.Equal(ips, tt.wantIPs) {
				t.Errorf("serving certificate SANs %v %v, want [%s] %v", serving.DNSNames, ips, tt.node, tt.wantIPs)
			}
			if !slices.Equal(serving.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("serving certificate usages %v, want server auth only", serving.ExtKeyUsage)
			}
			for _, host := range []string{"kubernetes.default.svc", "localhost", "10.96.0.1", "10.1.2.3"} {
				if serving.VerifyHostname(host) == nil {
					t.Errorf("the node's serving certificate is valid for %s, an API server name", host)
				}
			}
			client := parseCert(t, nc.ClientCert)
			if client.Subject.CommonName != "system:node:"+tt.node || !slices.Equal(client.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
				t.Errorf("client certificate %s %v, want system:node:%s, client auth only", client.Subject.CommonName, client.ExtKeyUsage, tt.node)
			}
		})
	}
}

// localNonLoopbackIP is an address of this machine other than loopback
// ("" when it has none).
func localNonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatalf("no PEM in %q", certPEM)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFetchCARefusesANodePosingAsTheServer: a join-token holder can get a
// node's serving certificate for its own address and hand out the
// cluster's (public) CA; the pin matches, but its certificate is not an
// API server's, so FetchCA refuses it, and a joining server or agent
// never sends it a token.
func TestFetchCARefusesANodePosingAsTheServer(t *testing.T) {
	cp := bootstrapCP(t)
	nc, err := cp.ca.IssueNode("laptop", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, err := tls.X509KeyPair(nc.ServingCert, nc.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	apiCert, apiKey, err := cp.ca.Issue(servingLeaf("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	realCert, err := tls.X509KeyPair(apiCert, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(cert tls.Certificate) string {
		srv := httptest.NewUnstartedServer(cp.bootstrapHandler())
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	rogue, real := serve(nodeCert), serve(realCert)
	for _, skip := range []bool{false, true} {
		pin := cp.ca.Hash()
		if skip {
			pin = ""
		}
		if _, err := FetchCA(t.Context(), rogue, pin, skip); !errors.Is(err, pki.ErrNotAPIServer) {
			t.Errorf("FetchCA from a node's server (skip verification %v): %v, want %v", skip, err, pki.ErrNotAPIServer)
		}
		if _, err := FetchCA(t.Context(), real, pin, skip); err != nil {
			t.Errorf("FetchCA from the API server (skip verification %v): %v", skip, err)
		}
	}
}
