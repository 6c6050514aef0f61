package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// # Users' client certificates
//
// A user's credential is a client certificate of the cluster CA, CN the
// user and O the groups (Kubernetes' x509 authenticator reads them so):
// `skiff kubeconfig --user alice --group students` makes a key and a
// certificate request (NewUserRequest), sends it through the
// CertificateSigningRequest API, approves it, and the control plane's
// signer (SignClient) issues it. The key never leaves the machine that
// made it.

// MaxClientValidity caps what SignClient issues: the leaves' year.
const MaxClientValidity = leafValidity

// NewUserRequest makes a key pair and a PEM certificate request for user
// in groups, both PEM.
func NewUserRequest(user string, groups []string) (csrPEM, keyPEM []byte, err error) {
	if user == "" {
		return nil, nil, errors.New("certificate request: no user name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: groups}}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// SignClient issues a client certificate for the public key of req with
// its subject (CN and O, nothing else: no SANs, no extensions), client
// usage only, valid for validity (at most MaxClientValidity; 0 means the
// maximum). Reserved names (Reserved) are refused.
func (ca *CA) SignClient(req *x509.CertificateRequest, validity time.Duration, now time.Time) ([]byte, error) {
	if ca.key == nil {
		return nil, errors.New("sign: this copy of the CA has no key")
	}
	if req.Subject.CommonName == "" {
		return nil, errors.New("sign: the request names no user (an empty common name)")
	}
	if why := Reserved(req.Subject.CommonName, req.Subject.Organization); why != "" {
		return nil, fmt.Errorf("sign: %s", why)
	}
	if validity <= 0 || validity > MaxClientValidity {
		validity = MaxClientValidity
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
