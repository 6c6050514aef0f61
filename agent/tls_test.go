package agent

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
)

// fromAPIServerRequest is a request to the agent's Handler as the API
// server sends it: over TLS, with its verified client certificate (CN
// kube-apiserver-kubelet-client, O system:masters).
func fromAPIServerRequest(t testing.TB, method, target string, body io.Reader) *http.Request {
	t.Helper()
	c := pkitest.Leaf(t, pkitest.CA(t), pki.Leaf{CommonName: pki.APIServerKubeletClient, Organization: []string{pki.MastersGroup}, Client: true})
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, target, body)
	req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{x}}}
	return req
}
