package apiserver

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
)

var (
	testCAOnce sync.Once
	testCAVal  *pki.CA
)

// testCA is one cluster CA for the package's tests (made in the first
// test's temp dir; it lives in memory after that).
func testCA(t testing.TB) *pki.CA {
	testCAOnce.Do(func() { testCAVal = pkitest.CA(t) })
	return testCAVal
}

// testServerTLS is a serving TLS config of testCA for 127.0.0.1.
func testServerTLS(t testing.TB) *tls.Config { return pkitest.ServerTLS(t, testCA(t)) }

// TestServesHTTPSOnly: a plain-HTTP request gets Go's 400 and no API
// data, whatever it carries; over TLS the same request is answered.
func TestServesHTTPSOnly(t *testing.T) {
	srv := startTLSServer(t, nil, nil)
	tests := []struct {
		name     string
		client   *http.Client
		scheme   string
		wantCode int
		wantBody string
	}{
		{"plain http with the token", &http.Client{}, "http", http.StatusBadRequest, "Client sent an HTTP request to an HTTPS server"},
		{"https trusting the cluster CA", pkitest.HTTPClient(testCA(t), nil), "https", http.StatusOK, `"kind":"NamespaceList"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tt.scheme+"://"+srv.Addr()+"/api/v1/namespaces", nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := tt.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(b), tt.wantBody) {
				t.Fatalf("%d %q, want %d with %q", resp.StatusCode, b, tt.wantCode, tt.wantBody)
			}
			if tt.scheme == "http" && strings.Contains(string(b), "default") {
				t.Fatalf("plain HTTP got API data: %q", b)
			}
		})
	}
	// A client that does not trust the cluster CA does not get through.
	if _, err := http.Get("https://" + srv.Addr() + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the CA: %v, want a certificate error", err)
	}
}

func TestListenRefusesWithoutTLS(t *testing.T) {
	e := newEnv(t)
	cfg := DefaultConfig()
	cfg.Token, cfg.Listen = testToken, "127.0.0.1:0"
	srv, err := New(cfg, e.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "HTTPS only") {
		t.Fatalf("Listen without TLS: %v", err)
	}
}
