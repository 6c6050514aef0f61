package serviceaccount

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func newTokens(t *testing.T) *Tokens {
	t.Helper()
	key, err := LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

var req = Request{
	Namespace:      "team-a",
	ServiceAccount: Ref{Name: "default", UID: "sa-uid"},
	Pod:            &Ref{Name: "web", UID: "pod-uid"},
	Expiration:     time.Hour,
}

func TestIssueClaims(t *testing.T) {
	tk := newTokens(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tk.SetClock(func() time.Time { return now })
	tok, exp, err := tk.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(now.Add(time.Hour)) {
		t.Errorf("expiry %v, want %v", exp, now.Add(time.Hour))
	}
	parts := strings.Split(tok, ".")
	hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var h map[string]any
	var c map[string]any
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if h["alg"] != "ES256" || h["kid"] == "" {
		t.Errorf("header %v: want alg ES256 and a kid", h)
	}
	want := map[string]any{
		"iss": Issuer, "sub": "system:serviceaccount:team-a:default", "aud": []any{Issuer},
		"exp": float64(now.Add(time.Hour).Unix()), "iat": float64(now.Unix()), "nbf": float64(now.Unix()),
		"kubernetes.io": map[string]any{
			"namespace":      "team-a",
			"serviceaccount": map[string]any{"name": "default", "uid": "sa-uid"},
			"pod":            map[string]any{"name": "web", "uid": "pod-uid"},
		},
	}
	for k, v := range want {
		gb, _ := json.Marshal(c[k])
		wb, _ := json.Marshal(v)
		if string(gb) != string(wb) {
			t.Errorf("claim %s = %s, want %s", k, gb, wb)
		}
	}
	if c["jti"] == "" || c["jti"] == nil {
		t.Error("no jti claim")
	}
}

func TestVerify(t *testing.T) {
	tk := newTokens(t)
	other := newTokens(t)
	now := time.Now()
	tk.SetClock(func() time.Time { return now })
	good, _, err := tk.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	vault := req
	vault.Audiences = []string{"vault"}
	forVault, _, _ := tk.Issue(vault)
	foreign, _, _ := other.Issue(req)
	otherIssuer := func() string {
		c := jwt.MapClaims{"iss": "https://accounts.example.com", "sub": "x", "exp": now.Add(time.Hour).Unix()}
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		s, _ := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(k)
		return s
	}()
	unsigned := func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": Issuer, "aud": Issuer, "sub": "system:serviceaccount:team-a:default",
			"exp": now.Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s
	}()
	cases := []struct {
		name   string
		token  string
		at     time.Duration // verify at now + at
		notOur bool
		bad    bool
	}{
		{name: "fresh", token: good},
		{name: "within the skew after expiry", token: good, at: time.Hour + 30*time.Second},
		{name: "expired", token: good, at: time.Hour + 2*time.Minute, bad: true},
		{name: "not yet valid", token: good, at: -2 * time.Minute, bad: true},
		{name: "another audience", token: forVault, bad: true},
		{name: "another key", token: foreign, bad: true},
		{name: "alg none", token: unsigned, bad: true},
		{name: "another issuer", token: otherIssuer, notOur: true},
		{name: "not a JWT", token: "skiff-admin-token-abc", notOur: true},
		{name: "garbage with dots", token: "eyJ.x.y", notOur: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk.SetClock(func() time.Time { return now.Add(tc.at) })
			c, err := tk.Verify(tc.token)
			switch {
			case tc.notOur:
				if !errors.Is(err, ErrNotServiceAccountToken) {
					t.Fatalf("err %v, want ErrNotServiceAccountToken", err)
				}
			case tc.bad:
				if err == nil || errors.Is(err, ErrNotServiceAccountToken) {
					t.Fatalf("err %v, want a refusal", err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if c.Kubernetes.Pod == nil || c.Kubernetes.Pod.UID != "pod-uid" || c.Kubernetes.ServiceAccount.UID != "sa-uid" || !slices.Contains(c.Audience, Issuer) {
					t.Errorf("claims %+v", c)
				}
			}
		})
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	k1, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("the second start made a new key")
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(dir); err == nil || !strings.Contains(err.Error(), KeyFile) {
		t.Errorf("damaged key: err %v, want one naming %s", err, KeyFile)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, KeyFile)); string(b) != "not a key" {
		t.Error("a damaged key was replaced")
	}
}

func TestIssueRefusesIncompleteRequests(t *testing.T) {
	tk := newTokens(t)
	for name, r := range map[string]Request{
		"no namespace":  {ServiceAccount: Ref{Name: "a", UID: "u"}, Expiration: time.Hour},
		"no uid":        {Namespace: "n", ServiceAccount: Ref{Name: "a"}, Expiration: time.Hour},
		"no expiration": {Namespace: "n", ServiceAccount: Ref{Name: "a", UID: "u"}},
	} {
		if _, _, err := tk.Issue(r); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
}
