package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/pki/pkitest"
)

// TestTLSMemberRefusesOthersCertificates: a member on TLS serves its
// peer and client URLs only to certificates named pki.EtcdCommonName:
// not to a client without one, nor to a node's certificate of the same
// CA.
func TestTLSMemberRefusesOthersCertificates(t *testing.T) {
	ca := pkitest.CA(t)
	dir := t.TempDir()
	write := func(name string, leaf pki.Leaf) (string, string) {
		t.Helper()
		certPEM, keyPEM, err := ca.Issue(leaf)
		if err != nil {
			t.Fatal(err)
		}
		c, k := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := os.WriteFile(c, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(k, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := write("peer", pki.EtcdLeaf("127.0.0.1"))
	cfg := etcdtest.Config(t, "tls")
	cfg.ClientURL, cfg.PeerURL = "https://"+etcdtest.FreeAddr(t), "https://"+etcdtest.FreeAddr(t)
	cfg.TLS = &etcd.TLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, AllowedCN: pki.EtcdCommonName}
	m := etcdtest.StartWith(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := m.Client().Put(ctx, "k", "v"); err != nil {
		t.Fatalf("the member's own client: %v", err)
	}

	nc := pkitest.Node(t, ca, "gpu-1")
	nodeCert, err := tls.X509KeyPair(nc.ClientCert, nc.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	etcdCert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	peerGet := func(certs []tls.Certificate) error {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12}}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(cfg.PeerURL + "/version")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := peerGet([]tls.Certificate{etcdCert}); err != nil {
		t.Fatalf("a peer with the servers' etcd certificate: %v", err)
	}
	for _, tt := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"a node's client certificate", []tls.Certificate{nodeCert}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := peerGet(tt.certs); err == nil {
				t.Error("the peer URL answered")
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
				TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: tt.certs, MinVersion: tls.VersionTLS12}})
			if err != nil {
				return // refused at dial: as good
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if _, err := cli.Get(ctx, "k"); err == nil {
				t.Fatal("read a key through the client URL")
			}
		})
	}
}
