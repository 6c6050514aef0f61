package client_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
)

// tlsServer serves HTTPS with cfg and counts the requests that reach it,
// and those that carry a token.
func tlsServer(t testing.TB, cfg *tls.Config) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"default"}}`))
	}))
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestOnlyAnAPIServerIsTrusted: a server whose certificate the cluster CA
// signed for its very address, but as a node's (what anyone with the join
// token can get), is no API server: no request reaches it, not the token,
// and a failover list moves past it to the real one.
func TestOnlyAnAPIServerIsTrusted(t *testing.T) {
	ca := pkitest.CA(t)
	nc := pkitest.Node(t, ca, "laptop") // serving certificate for 127.0.0.1
	nodeCert, err := tls.X509KeyPair(nc.ServingCert, nc.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	rogue, rogueHits := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{nodeCert}})
	real, realHits := tlsServer(t, pkitest.ServerTLS(t, ca))
	nsKind := api.MustKindOf(&api.Namespace{})

	t.Run("alone", func(t *testing.T) {
		c, err := client.New(client.Config{Server: rogue.URL, Token: "admin-token", CAData: ca.CertPEM()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Get(t.Context(), nsKind, "", "default")
		if !errors.Is(err, pki.ErrNotAPIServer) || !client.IsNotAPIServer(err) {
			t.Fatalf("get from a node's server: %v, want %v", err, pki.ErrNotAPIServer)
		}
		if err := (client.Config{CAData: ca.CertPEM()}).CheckServer(t.Context(), rogue.URL); !errors.Is(err, pki.ErrNotAPIServer) {
			t.Fatalf("CheckServer: %v, want %v", err, pki.ErrNotAPIServer)
		}
	})
	t.Run("first in the failover list", func(t *testing.T) {
		c, err := client.New(client.Config{Server: rogue.URL, Servers: []string{real.URL}, Token: "admin-token", CAData: ca.CertPEM()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(t.Context(), nsKind, "", "default"); err != nil {
			t.Fatalf("get with the real server second: %v", err)
		}
		if c.Server() != real.URL {
			t.Errorf("current server %s, want the real one %s", c.Server(), real.URL)
		}
	})
	t.Run("the real server passes", func(t *testing.T) {
		if err := (client.Config{CAData: ca.CertPEM()}).CheckServer(t.Context(), real.URL); err != nil {
			t.Fatal(err)
		}
	})
	if n := rogueHits.Load(); n != 0 {
		t.Errorf("%d requests reached the server with a node's certificate, want none", n)
	}
	if realHits.Load() == 0 {
		t.Error("no request reached the real API server")
	}
}
