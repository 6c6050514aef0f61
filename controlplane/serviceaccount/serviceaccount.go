// Package serviceaccount signs and verifies ServiceAccount tokens, as
// kube-apiserver's serviceaccount token generator and authenticator: a
// token is a JWT (ES256) signed with the cluster's service account key
// (DATA-DIR/pki/sa.key, created on a server's first start and copied to
// every server that joins, so any server verifies what another signed).
//
// Claims, word for word Kubernetes' (pkg/serviceaccount/claims.go):
//
//	iss  https://kubernetes.default.svc.cluster.local
//	sub  system:serviceaccount:NAMESPACE:NAME
//	aud  the audiences asked for (default: the issuer, the API server's own)
//	exp, iat, nbf, jti
//	kubernetes.io: {namespace, serviceaccount: {name, uid}, pod: {name, uid}}
//
// Invariants:
//   - Verify accepts only ES256 tokens signed by this key, issued by
//     Issuer, not expired (a minute of clock skew forgiven) and meant for
//     one of the API audiences; a token for another audience (a pod's
//     token for Vault, say) never authenticates to the API server.
//   - A verified token is not yet a user: the caller (the API server's
//     authenticator) checks that the service account, and the pod a token
//     is bound to, still exist with the uids the token names.
//   - Tokens are never stored; revoking one means deleting its service
//     account or its pod.
package serviceaccount

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"skiff.dev/skiff/internal/atomicfile"
)

// KeyFile is the signing key's file in the pki directory (kubeadm's name).
const KeyFile = "sa.key"

// Issuer is the tokens' iss claim and the API server's audience.
const Issuer = "https://kubernetes.default.svc.cluster.local"

// UserPrefix + "NAMESPACE:NAME" is a service account's user name (the sub claim).
const UserPrefix = "system:serviceaccount:"

// clockSkew is how far exp and nbf may be off (Kubernetes' validator
// allows a minute of skew).
const clockSkew = time.Minute

// LoadOrCreateKey returns the signing key in dir (DATA-DIR/pki),
// creating it on first start: a P-256 key, written atomically with mode
// 0600. A file that is there but does not hold an EC key is an error
// naming it, never replaced (every token signed with it would die).
func LoadOrCreateKey(dir string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		return parseKey(path, b)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read service account key: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode service account key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("write service account key: %w", err)
	}
	return key, nil
}

func parseKey(path string, b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("service account key %s: no PEM block (restore it from another server's pki directory)", path)
	}
	if k, err := x509.ParseECPrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("service account key %s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("service account key %s: want an ECDSA P-256 key, got %T", path, k)
	}
	return ec, nil
}

// Ref names an object a token speaks for.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// KubernetesClaims is the "kubernetes.io" claim.
type KubernetesClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
}

// Claims of a service account token.
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes KubernetesClaims `json:"kubernetes.io"`
}

// Request is what a token is issued for.
type Request struct {
	Namespace      string
	ServiceAccount Ref
	// Pod the token is bound to, or nil.
	Pod *Ref
	// Audiences; empty means the API audiences.
	Audiences []string
	// Expiration is the token's lifetime.
	Expiration time.Duration
}

// Tokens signs and verifies tokens with one key. Safe for concurrent use.
type Tokens struct {
	key *ecdsa.PrivateKey
	kid string
	// audiences the API server accepts.
	audiences []string
	// now is the clock (tests move it).
	now func() time.Time
}

// New returns Tokens over key, accepting tokens for the API audience
// (Issuer).
func New(key *ecdsa.PrivateKey) (*Tokens, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	sum := sha256.Sum256(der)
	// The key id as Kubernetes computes it: the unpadded base64url
	// SHA-256 of the DER public key.
	return &Tokens{key: key, kid: base64.RawURLEncoding.EncodeToString(sum[:]), audiences: []string{Issuer}, now: time.Now}, nil
}

// SetClock replaces the clock (tests).
func (t *Tokens) SetClock(now func() time.Time) { t.now = now }

// Audiences are the audiences the API server accepts.
func (t *Tokens) Audiences() []string { return append([]string(nil), t.audiences...) }

// Issue signs a token for r and returns it with its expiry.
func (t *Tokens) Issue(r Request) (string, time.Time, error) {
	if r.Namespace == "" || r.ServiceAccount.Name == "" || r.ServiceAccount.UID == "" {
		return "", time.Time{}, errors.New("issue token: namespace, service account name and uid are required")
	}
	if r.Expiration <= 0 {
		return "", time.Time{}, fmt.Errorf("issue token: expiration %v must be positive", r.Expiration)
	}
	now := t.now().Truncate(time.Second)
	exp := now.Add(r.Expiration)
	aud := r.Audiences
	if len(aud) == 0 {
		aud = t.audiences
	}
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   UserPrefix + r.Namespace + ":" + r.ServiceAccount.Name,
			Audience:  jwt.ClaimStrings(aud),
			ExpiresAt: jwt.NewNumericDate(exp),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ID:        rand.Text(),
		},
		Kubernetes: KubernetesClaims{Namespace: r.Namespace, ServiceAccount: r.ServiceAccount, Pod: r.Pod},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = t.kid
	s, err := tok.SignedString(t.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return s, exp, nil
}

// ErrNotServiceAccountToken means the token is not one of ours at all
// (not a JWT, or another issuer's): an authenticator passes it on.
var ErrNotServiceAccountToken = errors.New("not a service account token")

// Verify checks a token's signature, issuer, lifetime and audience and
// returns its claims. A token that is not a JWT of this issuer is
// ErrNotServiceAccountToken; any other error means it is ours but bad.
func (t *Tokens) Verify(token string) (*Claims, error) {
	if !looksLikeJWT(token) {
		return nil, ErrNotServiceAccountToken
	}
	// The issuer first, unverified: another issuer's token is not ours to refuse.
	var peek jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); err != nil || peek.Issuer != Issuer {
		return nil, ErrNotServiceAccountToken
	}
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return &t.key.PublicKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(t.audiences...),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(clockSkew),
		jwt.WithTimeFunc(t.now))
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || c.Subject != UserPrefix+k.Namespace+":"+k.ServiceAccount.Name {
		return nil, errors.New("service account token: the subject does not match its kubernetes.io claims")
	}
	return &c, nil
}

// looksLikeJWT: three dot-separated parts, the first a JSON header.
func looksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	return len(parts) == 3 && strings.HasPrefix(parts[0], "eyJ")
}
