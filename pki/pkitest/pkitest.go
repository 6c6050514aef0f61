// Package pkitest gives tests a cluster CA and the TLS configurations
// skiff's components use with it: the API server's serving side, a
// client trusting the CA, the API server's client certificate towards
// the agents and a node's credentials, all in a test's temp dir.
package pkitest

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"skiff.dev/skiff/pki"
)

// CA is a fresh cluster CA in a temp dir.
func CA(t testing.TB) *pki.CA {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// ServerTLS is an API server's TLS: a serving certificate for localhost
// and 127.0.0.1, client certificates of ca verified if given.
func ServerTLS(t testing.TB, ca *pki.CA) *tls.Config {
	t.Helper()
	return ca.ServerTLS(Leaf(t, ca, pki.APIServerLeaf(pki.Leaf{DNSNames: []string{"localhost"}, IPs: localIPs()})), false)
}

// Leaf issues leaf and returns it as a tls.Certificate.
func Leaf(t testing.TB, ca *pki.CA, leaf pki.Leaf) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(leaf)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// KubeletClientTLS is the API server's TLS towards the agents: ca's
// roots, the client certificate kube-apiserver-kubelet-client in
// system:masters.
func KubeletClientTLS(t testing.TB, ca *pki.CA) *tls.Config {
	t.Helper()
	c := Leaf(t, ca, pki.Leaf{CommonName: pki.APIServerKubeletClient, Organization: []string{pki.MastersGroup}, Client: true})
	return ca.ClientTLS(&c)
}

// Node issues the credentials of node name at 127.0.0.1.
func Node(t testing.TB, ca *pki.CA, name string) *pki.NodeCredentials {
	t.Helper()
	nc, err := ca.IssueNode(name, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &nc
}

// HTTPClient is an HTTP client that trusts ca and presents cert (nil:
// none).
func HTTPClient(ca *pki.CA, cert *tls.Certificate) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = ca.ClientTLS(cert)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func localIPs() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback} }

// StartAPIServer serves h over HTTPS with an API server's certificate
// (ServerTLS) of a fresh CA, closed at cleanup, and returns the server
// and the CA's PEM, what a kubeconfig holds: skiff's clients talk only to
// a server whose certificate is an API server's (pki.VerifyAPIServer).
func StartAPIServer(t testing.TB, h http.Handler) (*httptest.Server, []byte) {
	t.Helper()
	ca := CA(t)
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = ServerTLS(t, ca)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, ca.CertPEM()
}
