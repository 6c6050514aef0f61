package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func serial0(t *testing.T, c tls.Certificate) string {
	t.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.SerialNumber.String()
}

func TestLoadOrIssueReissuesOnlyWhenNeeded(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreateCA(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "pki", APIServerCertFile), filepath.Join(dir, "pki", APIServerKeyFile)
	dns, ips := ServingNames("10.0.0.1:7443")
	leaf := Leaf{CommonName: "kube-apiserver", DNSNames: dns, IPs: ips, Server: true}
	now := time.Now()
	if _, err := ca.LoadOrIssue(certPath, keyPath, leaf, now); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	moreDNS, moreIPs := ServingNames("10.0.0.1:7443", "10.0.0.2")
	tests := []struct {
		name   string
		signer *CA
		leaf   Leaf
		now    time.Time
		same   bool
	}{
		{"unchanged: kept", ca, leaf, now, true},
		{"SANs in another order: kept", ca, Leaf{CommonName: leaf.CommonName, DNSNames: leaf.DNSNames, IPs: []net.IP{ips[1], ips[0]}, Server: true}, now, true},
		{"a new address: reissued", ca, Leaf{CommonName: leaf.CommonName, DNSNames: moreDNS, IPs: moreIPs, Server: true}, now, false},
		{"near expiry: reissued", ca, leaf, now.Add(leafValidity - leafValidity/20), false},
		{"another CA: reissued", other, leaf, now, false},
		{"client usage now: reissued", ca, Leaf{CommonName: leaf.CommonName, DNSNames: dns, IPs: ips, Server: true, Client: true}, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each case starts from the first certificate.
			if _, err := ca.LoadOrIssue(certPath, keyPath, leaf, now); err != nil {
				t.Fatal(err)
			}
			base, err := tls.LoadX509KeyPair(certPath, keyPath)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.signer.LoadOrIssue(certPath, keyPath, tt.leaf, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if same := serial0(t, got) == serial0(t, base); same != tt.same {
				t.Fatalf("kept the certificate = %v, want %v", same, tt.same)
			}
			x, _ := x509.ParseCertificate(got.Certificate[0])
			if err := tt.signer.Verify(x, now); err != nil {
				t.Fatalf("certificate not signed by the CA asked: %v", err)
			}
		})
	}
}

func TestServingNames(t *testing.T) {
	dns, ips := ServingNames("0.0.0.0:7443", "node-a", "10.0.0.5", "10.0.0.5:10250", "localhost", "")
	if want := []string{"localhost", "node-a"}; !slices.Equal(dns, want) {
		t.Errorf("DNS SANs %v, want %v", dns, want)
	}
	var got []string
	for _, ip := range ips {
		got = append(got, ip.String())
	}
	if want := []string{"10.0.0.5", "127.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("IP SANs %v, want %v (no 0.0.0.0, no repeats)", got, want)
	}
}

func TestNodeCredentials(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ca.IssueNode("gpu-1", []string{"10.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	nodeDir := NodeDir(filepath.Join(dir, "agent"))
	if _, err := LoadNodeCredentials(nodeDir); !IsNotExist(err) {
		t.Fatalf("no credentials yet: %v, want not-exist", err)
	}
	if err := nc.Save(nodeDir); err != nil {
		t.Fatal(err)
	}
	got, err := LoadNodeCredentials(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	client, err := tls.X509KeyPair(got.ClientCert, got.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := x509.ParseCertificate(client.Certificate[0])
	if user, groups := Identity(x); user != "system:node:gpu-1" || !slices.Equal(groups, []string{"system:nodes"}) {
		t.Errorf("client certificate names %s %v, want system:node:gpu-1 [system:nodes]", user, groups)
	}
	tests := []struct {
		name, node string
		addrs      []string
		now        time.Time
		want       string // "" = fits
	}{
		{"fits", "gpu-1", []string{"10.0.0.7"}, time.Now(), ""},
		{"another node", "gpu-2", []string{"10.0.0.7"}, time.Now(), "subject differs"},
		{"the node moved", "gpu-1", []string{"10.0.0.8"}, time.Now(), "SANs differ"},
		{"near expiry", "gpu-1", []string{"10.0.0.7"}, time.Now().Add(leafValidity - leafValidity/20), "needs renewal"},
		{"expired", "gpu-1", []string{"10.0.0.7"}, time.Now().Add(leafValidity + time.Hour), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := got.Check(tt.node, tt.addrs, tt.now)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check: %v, want an error with %q", err, tt.want)
			}
		})
	}
	if st, err := os.Stat(filepath.Join(nodeDir, NodeClientKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v %v, want mode 0600", st, err)
	}
}

func TestWriteCARefusesAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateCA(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateCA(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	aKey, _ := a.KeyPEM()
	bKey, _ := b.KeyPEM()
	target := filepath.Join(dir, "joined")
	if err := WriteCA(target, a.CertPEM(), bKey); err == nil {
		t.Fatal("WriteCA accepted a key of another CA")
	}
	if err := WriteCA(target, a.CertPEM(), aKey); err != nil {
		t.Fatal(err)
	}
	if err := WriteCA(target, a.CertPEM(), aKey); err != nil {
		t.Fatalf("the same CA again: %v", err)
	}
	if err := WriteCA(target, b.CertPEM(), bKey); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("another CA over it: %v", err)
	}
	got, err := LoadOrCreateCA(target)
	if err != nil || got.Hash() != a.Hash() || !got.CanSign() {
		t.Fatalf("installed CA: %v", err)
	}
}
