package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateCAKeepsOneCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Hash() != again.Hash() {
		t.Fatalf("second load made a new CA: %s, then %s", ca.Hash(), again.Hash())
	}
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %v, want 0600", st.Mode().Perm())
	}
	if !ca.CanSign() {
		t.Error("a loaded server CA cannot sign")
	}
}

func TestLoadOrCreateCARefusesHalfACA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateCA(dir)
	if err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("err = %v, want the missing half named", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, CAKeyFile)); serr == nil {
		t.Error("a new key was written beside the old certificate")
	}
}

func TestIssuedCertificatesVerify(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		leaf  Leaf
		usage x509.ExtKeyUsage
	}{
		{"serving", Leaf{CommonName: "skiff-apiserver", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}, x509.ExtKeyUsageServerAuth},
		{"node client", Leaf{CommonName: NodeUserPrefix + "gpu-1", Organization: []string{NodesGroup}, Client: true}, x509.ExtKeyUsageClientAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(tt.leaf)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatalf("issued pair does not load: %v", err)
			}
			c := pair.Leaf
			opts := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{tt.usage}}
			if tt.leaf.Server {
				opts.DNSName = "localhost"
			}
			if _, err := c.Verify(opts); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if c.Subject.CommonName != tt.leaf.CommonName || strings.Join(c.Subject.Organization, ",") != strings.Join(tt.leaf.Organization, ",") {
				t.Errorf("subject %v, want CN %s O %v", c.Subject, tt.leaf.CommonName, tt.leaf.Organization)
			}
			if NeedsRenewal(c, time.Now()) {
				t.Error("a fresh certificate needs renewal")
			}
			if !NeedsRenewal(c, c.NotAfter.Add(-time.Hour)) {
				t.Error("a certificate an hour from expiry does not need renewal")
			}
		})
	}
}

func TestHashPinsThePublicKey(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyCA, err := FromPEM(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	if copyCA.CanSign() {
		t.Error("a CA from its certificate alone can sign")
	}
	tests := []struct {
		name, pin string
		ok        bool
	}{
		{"own hash", ca.Hash(), true},
		{"upper-case hex", "sha256:" + strings.ToUpper(strings.TrimPrefix(ca.Hash(), "sha256:")), true},
		{"another CA", other.Hash(), false},
		{"no prefix", strings.TrimPrefix(ca.Hash(), "sha256:"), false},
		{"short", "sha256:abcd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := copyCA.CheckHash(tt.pin)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckHash(%q) = %v, want ok=%v", tt.pin, err, tt.ok)
			}
		})
	}
	if _, err := FromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})); err == nil {
		t.Error("FromPEM accepted junk")
	}
}
