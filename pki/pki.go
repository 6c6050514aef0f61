// Package pki is the cluster's certificate authority: the one CA every
// skiff component trusts, as kubeadm's /etc/kubernetes/pki/ca.crt.
//
// A server keeps it in DATA-DIR/pki (ca.crt, ca.key; the key mode 0600)
// and signs with it:
//
//   - the API server's serving certificate (SANs: every address it is
//     reached at and the `kubernetes` Service IP);
//   - each node's client certificate, CN system:node:NAME in group
//     system:nodes, the node credential (Kubernetes' Node authorizer
//     shape), and the agent's serving certificate (the kubelet's);
//   - the API server's client certificate towards the agents (CN
//     kube-apiserver-kubelet-client, group system:masters), which the
//     agents check when the API server proxies logs, exec and port-forward.
//
// Hash is the CA's public-key pin in kubeadm's discovery shape
// ("sha256:HEX" of the certificate's SubjectPublicKeyInfo): a joining
// agent refuses a server whose CA does not match it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"skiff.dev/skiff/internal/atomicfile"
)

// Files of the CA inside its directory (DATA-DIR/pki).
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Names Kubernetes gives its identities, matched word for word.
const (
	// NodeUserPrefix + node name is a node's user (system:node:gpu-1).
	NodeUserPrefix = "system:node:"
	// NodesGroup holds every node's user.
	NodesGroup = "system:nodes"
	// MastersGroup may do anything (the admin, the API server towards agents).
	MastersGroup = "system:masters"
	// APIServerKubeletClient is the API server's user towards the agents.
	APIServerKubeletClient = "kube-apiserver-kubelet-client"
)

// Validity of what the CA signs. The CA lives ten years, as kubeadm's;
// leaves one year, as kubeadm's, and are reissued when they near expiry
// (NeedsRenewal).
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so a machine whose clock runs a little
	// behind still accepts a fresh certificate.
	clockSkew = 5 * time.Minute
)

// CA is a loaded certificate authority: its certificate and, on a server,
// its key. An agent holds a CA without a key (FromPEM): enough to verify.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer // nil: verify only
}

// LoadOrCreateCA returns the CA kept in dir, creating it on first start.
// Each file is written atomically (temporary file, then rename), the key
// first, so a crash never leaves half a file or a certificate without its
// key; a certificate without its key (or the reverse) is an error that
// says so, never silently replaced.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	_, cerr := os.Stat(certPath)
	_, kerr := os.Stat(keyPath)
	switch {
	case cerr == nil && kerr == nil:
		return loadCA(certPath, keyPath)
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
	case cerr == nil || kerr == nil:
		return nil, fmt.Errorf("cluster CA in %s: one of %s and %s is missing; restore it from a backup or move both aside to create a new CA (every node then has to join again)", dir, CACertFile, CAKeyFile)
	default:
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, errors.Join(cerr, kerr))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "skiff-ca"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	// The key first: a certificate on disk always has its key beside it.
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	return loadCA(certPath, keyPath)
}

func loadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("read cluster CA: %w", err)
	}
	ca, err := FromPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster CA %s: %w", certPath, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read cluster CA key: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster CA key %s: %w", keyPath, err)
	}
	if !publicKeysEqual(ca.cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("cluster CA %s: the key in %s does not belong to this certificate", certPath, keyPath)
	}
	ca.key = key
	return ca, nil
}

// FromPEM returns a verify-only CA from its certificate (an agent's copy,
// the ca.crt a pod gets).
func FromPEM(certPEM []byte) (*CA, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	if !c.IsCA {
		return nil, errors.New("the certificate is not a CA")
	}
	return &CA{cert: c, certPEM: pem.EncodeToMemory(b)}, nil
}

// CertPEM is the CA certificate, PEM-encoded (kubeconfig's
// certificate-authority-data, a pod's ca.crt).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate is the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool is a cert pool holding only this CA, for tls.Config RootCAs and ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// CanSign says whether the CA holds its key.
func (ca *CA) CanSign() bool { return ca.key != nil }

// Hash is the CA's pin as kubeadm writes it: "sha256:" and the hex SHA-256
// of the certificate's SubjectPublicKeyInfo.
func (ca *CA) Hash() string { return HashOf(ca.cert) }

// HashOf is the kubeadm-style pin of any certificate.
func HashOf(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CheckHash verifies that the CA matches a pin ("sha256:HEX", case-insensitive hex).
func (ca *CA) CheckHash(pin string) error {
	want := strings.ToLower(strings.TrimSpace(pin))
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		return fmt.Errorf("CA hash %q: want sha256: and 64 hex digits (as `skiff server` prints it)", pin)
	}
	if got := ca.Hash(); got != want {
		return fmt.Errorf("the server's CA does not match the pinned hash: got %s, want %s", got, want)
	}
	return nil
}

// Leaf says what a signed certificate is for.
type Leaf struct {
	// CommonName is the user (client) or the name (server).
	CommonName string
	// Organization lists the groups of a client certificate.
	Organization []string
	// DNSNames and IPs are the SANs of a serving certificate.
	DNSNames []string
	IPs      []net.IP
	// URIs are URI SANs: APIServerURI marks an API server's serving
	// certificate, EtcdPeerURI a server's etcd certificate (role.go).
	URIs []*url.URL
	// Server and Client choose the extended key usages (both may be set).
	Server, Client bool
}

// Issue signs a new key pair for leaf and returns the certificate and its
// key, PEM-encoded.
func (ca *CA) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	if ca.key == nil {
		return nil, nil, errors.New("issue certificate: this copy of the CA has no key")
	}
	if !leaf.Server && !leaf.Client {
		return nil, nil, errors.New("issue certificate: neither server nor client usage")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organization},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     leaf.DNSNames,
		IPAddresses:  leaf.IPs,
		URIs:         leaf.URIs,
	}
	if leaf.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// NeedsRenewal says whether a certificate should be reissued: it expires
// within a tenth of its validity.
func NeedsRenewal(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.Add(life / 10).After(c.NotAfter)
}

// ParseKey reads a PEM private key (PKCS#8, or EC/RSA PKCS#1 as other tools write).
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("not a PEM private key")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	return s, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}
