package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// An approval written without times (a client other than kubectl) gets
// them from the server, as Kubernetes' CSR strategy fills them in, and a
// condition written again with the same status keeps its transition
// time: the CSR cleaner counts its hour from them.
func TestCSRApprovalConditionTimes(t *testing.T) {
	e := newEnv(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice", Organization: []string{"students"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &api.CertificateSigningRequest{TypeMeta: api.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: api.ObjectMeta{Name: "alice"},
		Spec: api.CertificateSigningRequestSpec{SignerName: api.SignerKubeAPIServerClient, Usages: []string{"client auth"},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
	const path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	if code, body := e.do(http.MethodPost, path, csr); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	approve := func(transition api.Time) api.CertificateSigningRequestCondition {
		t.Helper()
		code, body := e.do(http.MethodGet, path+"/alice", nil)
		if code != http.StatusOK {
			t.Fatalf("get: %d %s", code, body)
		}
		var cur api.CertificateSigningRequest
		if err := json.Unmarshal(body, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.Conditions = []api.CertificateSigningRequestCondition{{Type: api.CertificateApproved, Status: api.ConditionTrue, Reason: "ByHand", LastTransitionTime: transition}}
		code, body = e.do(http.MethodPut, path+"/alice/approval", &cur)
		if code != http.StatusOK {
			t.Fatalf("approve: %d %s", code, body)
		}
		var out api.CertificateSigningRequest
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		c := api.CSRCondition(&out, api.CertificateApproved)
		if c == nil || c.LastUpdateTime.IsZero() || c.LastTransitionTime.IsZero() {
			t.Fatalf("approved condition %+v, want both times set", c)
		}
		return *c
	}
	long := api.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
	if first := approve(long); !first.LastTransitionTime.Equal(long.Time) || first.LastUpdateTime.Equal(long.Time) {
		t.Fatalf("first approval %+v: want the given transition time kept and the update time filled in", first)
	}
	if again := approve(api.Time{}); !again.LastTransitionTime.Equal(long.Time) {
		t.Fatalf("transition time moved from %s to %s though the status did not change", long, again.LastTransitionTime)
	}
}
