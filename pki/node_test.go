package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNodeServingLeaf(t *testing.T) {
	tests := []struct {
		name    string
		node    string
		addrs   []string
		wantDNS []string
		wantIPs []string
		wantErr string
	}{
		{"name and address", "gpu-1", []string{"10.0.0.7"}, []string{"gpu-1"}, []string{"10.0.0.7"}, ""},
		{"no localhost added", "gpu-1", nil, []string{"gpu-1"}, nil, ""},
		{"repeats dropped", "gpu-1", []string{"10.0.0.7", "10.0.0.7", "::1"}, []string{"gpu-1"}, []string{"10.0.0.7", "::1"}, ""},
		{"a name that is an IP address is no DNS name", "10.0.0.9", []string{"10.0.0.9"}, nil, []string{"10.0.0.9"}, ""},
		{"a DNS name as address", "gpu-1", []string{"kubernetes.default.svc"}, nil, nil, `node address "kubernetes.default.svc" is not an IP address`},
		{"no name", "", []string{"10.0.0.7"}, nil, nil, "no node name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf, err := NodeServingLeaf(tt.node, tt.addrs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NodeServingLeaf: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ips []string
			for _, ip := range leaf.IPs {
				ips = append(ips, ip.String())
			}
			if leaf.CommonName != tt.node || !slices.Equal(leaf.DNSNames, tt.wantDNS) || !slices.Equal(ips, tt.wantIPs) || !leaf.Server || leaf.Client {
				t.Errorf("leaf %+v, want CN %s DNS %v IPs %v, server usage only", leaf, tt.node, tt.wantDNS, tt.wantIPs)
			}
		})
	}
}

func TestIssueNodeUsages(t *testing.T) {
	ca, err := LoadOrCreateCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.IssueNode("gpu-1", []string{"gpu-1.lab"}); err == nil || !strings.Contains(err.Error(), "is not an IP address") {
		t.Fatalf("IssueNode with a DNS address: %v, want an error", err)
	}
	nc, err := ca.IssueNode("gpu-1", []string{"10.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		cert, key []byte
		want      x509.ExtKeyUsage
	}{
		{"client", nc.ClientCert, nc.ClientKey, x509.ExtKeyUsageClientAuth},
		{"serving", nc.ServingCert, nc.ServingKey, x509.ExtKeyUsageServerAuth},
	} {
		pair, err := tls.X509KeyPair(c.cert, c.key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pair.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{c.want}) {
			t.Errorf("%s certificate usages %v, want only %v", c.what, pair.Leaf.ExtKeyUsage, c.want)
		}
		if c.what == "serving" {
			for _, host := range []string{"localhost", "127.0.0.1"} {
				if pair.Leaf.VerifyHostname(host) == nil {
					t.Errorf("the serving certificate is valid for %s", host)
				}
			}
			if err := pair.Leaf.VerifyHostname("10.0.0.7"); err != nil {
				t.Errorf("the serving certificate is not valid for the node's address: %v", err)
			}
		}
	}
}

// TestOnlyAPIServersCarryTheIdentity: the API server's leaf carries
// APIServerURI; nothing a node gets does, whatever its name.
func TestOnlyAPIServersCarryTheIdentity(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	parse := func(certPEM []byte) *x509.Certificate {
		t.Helper()
		b, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	apiCert, _, err := ca.Issue(APIServerLeaf(Leaf{IPs: []net.IP{net.IPv4(10, 0, 0, 1)}}))
	if err != nil {
		t.Fatal(err)
	}
	if c := parse(apiCert); !IsAPIServer(c) || VerifyAPIServer([]*x509.Certificate{c}) != nil {
		t.Fatalf("the API server's certificate is not an API server's: URIs %v", c.URIs)
	}
	nc, err := ca.IssueNode("kube-apiserver", []string{"10.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]byte{nc.ServingCert, nc.ClientCert} {
		if x := parse(c); IsAPIServer(x) || !errors.Is(VerifyAPIServer([]*x509.Certificate{x}), ErrNotAPIServer) {
			t.Errorf("a node's certificate (%s) passes for an API server", x.Subject.CommonName)
		}
	}
	etcdCert, _, err := ca.Issue(EtcdLeaf("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if IsAPIServer(parse(etcdCert)) {
		t.Error("the etcd certificate passes for an API server")
	}
}

func TestReservedNames(t *testing.T) {
	for _, tt := range []struct {
		cn     string
		groups []string
		ok     bool
	}{
		{"alice", []string{"students"}, true},
		{"teacher", []string{MastersGroup}, true},
		{EtcdCommonName, nil, false},
		{"system:node:gpu-1", []string{NodesGroup}, false},
		{"bob", []string{NodesGroup}, false},
		{"system:serviceaccount:a:b", nil, false},
		{"carol", []string{"system:serviceaccounts:default"}, false},
	} {
		if got := Reserved(tt.cn, tt.groups) == ""; got != tt.ok {
			t.Errorf("Reserved(%q, %v) allows: %v, want %v", tt.cn, tt.groups, got, tt.ok)
		}
	}
}

// A user's request signed: CN and O kept, client usage only, no SANs,
// capped at a year; reserved names refused.
func TestSignClient(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, keyPEM, err := NewUserRequest("alice", []string{"students"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(csrPEM)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	certPEM, err := ca.SignClient(req, 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	c, _ := x509.ParseCertificate(pair.Certificate[0])
	if user, groups := Identity(c); user != "alice" || len(groups) != 1 || groups[0] != "students" {
		t.Errorf("identity %s %v", user, groups)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || IsAPIServer(c) || len(c.URIs)+len(c.DNSNames)+len(c.IPAddresses) > 0 {
		t.Errorf("usages %v, SANs %v %v %v: want client auth only, none", c.ExtKeyUsage, c.URIs, c.DNSNames, c.IPAddresses)
	}
	if got := c.NotAfter.Sub(now); got > 24*time.Hour+time.Minute || got < 23*time.Hour {
		t.Errorf("valid for %v, want a day", got)
	}
	if err := ca.Verify(c, now); err != nil {
		t.Error(err)
	}
	for _, bad := range [][2]string{{EtcdCommonName, ""}, {"system:node:gpu-1", NodesGroup}} {
		csrPEM, _, _ := NewUserRequest(bad[0], []string{bad[1]})
		b, _ := pem.Decode(csrPEM)
		req, _ := x509.ParseCertificateRequest(b.Bytes)
		if _, err := ca.SignClient(req, 0, now); err == nil {
			t.Errorf("signed a request for %s", bad[0])
		}
	}
}
