package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"skiff.dev/skiff/internal/atomicfile"
)

// Files of the API server's own certificates inside DATA-DIR/pki, named
// as kubeadm names them.
const (
	// APIServerCertFile and APIServerKeyFile: the API server's serving
	// certificate (SANs: every address it is reached at).
	APIServerCertFile = "apiserver.crt"
	APIServerKeyFile  = "apiserver.key"
	// KubeletClientCertFile and KubeletClientKeyFile: the API server's
	// client certificate towards the agents (APIServerKubeletClient).
	KubeletClientCertFile = "apiserver-kubelet-client.crt"
	KubeletClientKeyFile  = "apiserver-kubelet-client.key"
	// ServiceAccountKeyFile is the key service account tokens are signed
	// with (created by the service account token code; a joining server
	// gets a copy).
	ServiceAccountKeyFile = "sa.key"
)

// LoadOrIssue returns the certificate kept in certPath and keyPath when it
// still fits leaf, and otherwise issues a new one for leaf and writes it
// there (the key first, each file atomically, the key 0600). A kept
// certificate fits when it was signed by ca, its key matches, it has the
// leaf's subject, usages and exactly its SANs, and it does not need
// renewal (NeedsRenewal at now): so a server started with a new
// --listen or --advertise-address gets a certificate naming it.
func (ca *CA) LoadOrIssue(certPath, keyPath string, leaf Leaf, now time.Time) (tls.Certificate, error) {
	// A missing pair (the first start), a damaged one or one that no
	// longer fits is issued anew: the CA can always sign another.
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && ca.fits(c, leaf, now) == nil {
		return c, nil
	}
	certPEM, keyPEM, err := ca.Issue(leaf)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("write certificate: %w", err)
	}
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, fmt.Errorf("write certificate key: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("write certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// fits says why c does not fit leaf (nil when it does).
func (ca *CA) fits(c tls.Certificate, leaf Leaf, now time.Time) error {
	if len(c.Certificate) == 0 {
		return errors.New("no certificate")
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return err
	}
	if err := ca.Verify(x, now); err != nil {
		return err
	}
	if NeedsRenewal(x, now) {
		return errors.New("needs renewal")
	}
	if x.Subject.CommonName != leaf.CommonName || !slices.Equal(x.Subject.Organization, leaf.Organization) {
		return errors.New("subject differs")
	}
	if !slices.Equal(sortedStrings(x.DNSNames), sortedStrings(leaf.DNSNames)) || !sameIPs(x.IPAddresses, leaf.IPs) ||
		!slices.Equal(uriStrings(x.URIs), uriStrings(leaf.URIs)) {
		return errors.New("SANs differ")
	}
	if slices.Contains(x.ExtKeyUsage, x509.ExtKeyUsageServerAuth) != leaf.Server ||
		slices.Contains(x.ExtKeyUsage, x509.ExtKeyUsageClientAuth) != leaf.Client {
		return errors.New("usages differ")
	}
	return nil
}

// Verify checks that c was signed by this CA and is valid at now (any
// extended key usage).
func (ca *CA) Verify(c *x509.Certificate, now time.Time) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// KeyPEM is the CA's private key, PEM-encoded (a joining server's copy);
// nil for a verify-only CA.
func (ca *CA) KeyPEM() ([]byte, error) {
	if ca.key == nil {
		return nil, errors.New("this copy of the CA has no key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteCA installs a CA received from another server (a joining server)
// into dir: it checks that the key belongs to the certificate, and that
// dir holds no other CA (that data dir belongs to another cluster).
// Writing the same CA again is a no-op.
func WriteCA(dir string, certPEM, keyPEM []byte) error {
	ca, err := FromPEM(certPEM)
	if err != nil {
		return fmt.Errorf("install cluster CA: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return fmt.Errorf("install cluster CA: %w", err)
	}
	if !publicKeysEqual(ca.cert.PublicKey, key.Public()) {
		return errors.New("install cluster CA: the key does not belong to the certificate")
	}
	if old, err := os.ReadFile(filepath.Join(dir, CACertFile)); err == nil {
		have, perr := FromPEM(old)
		if perr != nil || have.Hash() != ca.Hash() {
			return fmt.Errorf("install cluster CA: %s already holds another cluster's CA: use another --data-dir", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("install cluster CA: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CAKeyFile), keyPEM, 0o600); err != nil {
		return fmt.Errorf("install cluster CA: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CACertFile), certPEM, 0o644); err != nil {
		return fmt.Errorf("install cluster CA: %w", err)
	}
	return nil
}

// ServerTLS is the TLS configuration of a server presenting cert whose
// clients may present a certificate of this CA: required with
// requireClient (the agents, which serve only the API server), verified
// if given otherwise (the API server: bearer tokens are the other way in).
func (ca *CA) ServerTLS(cert tls.Certificate, requireClient bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if requireClient {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.Pool(),
		ClientAuth:   auth,
		MinVersion:   tls.VersionTLS12,
	}
}

// ClientTLS is the TLS configuration of a client that trusts this CA
// only and presents cert (nil: no client certificate).
func (ca *CA) ClientTLS(cert *tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// Identity is the user and groups a verified client certificate names
// (CN and O), as Kubernetes' x509 authenticator reads them.
func Identity(c *x509.Certificate) (user string, groups []string) {
	return c.Subject.CommonName, c.Subject.Organization
}

// ServingNames are the SANs of a serving certificate for the given hosts
// (names or IP addresses, host:port accepted), with localhost and
// 127.0.0.1 always included; unspecified addresses (0.0.0.0, ::) are
// skipped. Repeats are dropped and the lists sorted, so the same hosts
// always give the same SANs (LoadOrIssue compares them).
func ServingNames(hosts ...string) (dns []string, ips []net.IP) {
	seenIP := map[string]bool{}
	seenDNS := map[string]bool{}
	for _, h := range append([]string{"localhost", "127.0.0.1"}, hosts...) {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if ip.IsUnspecified() || seenIP[ip.String()] {
				continue
			}
			seenIP[ip.String()] = true
			ips = append(ips, ip)
			continue
		}
		if !seenDNS[h] {
			seenDNS[h] = true
			dns = append(dns, h)
		}
	}
	slices.Sort(dns)
	slices.SortFunc(ips, func(a, b net.IP) int { return compareStrings(a.String(), b.String()) })
	return dns, ips
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func sameIPs(a, b []net.IP) bool {
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i, ip := range a {
		as[i] = ip.String()
	}
	for i, ip := range b {
		bs[i] = ip.String()
	}
	return slices.Equal(sortedStrings(as), sortedStrings(bs))
}

func uriStrings(us []*url.URL) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.String()
	}
	return sortedStrings(out)
}
