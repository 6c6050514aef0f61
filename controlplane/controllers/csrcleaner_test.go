package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// Kubernetes' csrcleaner deadlines: issued and approved an hour ago,
// denied or failed an hour ago, pending a day, or an expired certificate
// → deleted; anything younger is looked at again when its deadline
// comes, and nothing is deleted before.
func TestCSRCleaner(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) api.Time { return api.NewTime(now.Add(-d)) }
	cond := func(typ string, at api.Time) api.CertificateSigningRequestCondition {
		return api.CertificateSigningRequestCondition{Type: typ, Status: api.ConditionTrue, LastUpdateTime: at, LastTransitionTime: at}
	}
	valid, expired := testCertificate(t, now.Add(24*time.Hour)), testCertificate(t, now.Add(-time.Minute))
	csr := func(name string, created api.Time, cert []byte, conds ...api.CertificateSigningRequestCondition) *api.CertificateSigningRequest {
		return &api.CertificateSigningRequest{ObjectMeta: api.ObjectMeta{Name: name, UID: "uid-" + name, CreationTimestamp: created},
			Spec:   api.CertificateSigningRequestSpec{SignerName: api.SignerKubeAPIServerClient, Usages: []string{"client auth"}},
			Status: api.CertificateSigningRequestStatus{Conditions: conds, Certificate: cert}}
	}
	noTimes := cond(api.CertificateDenied, api.Time{})
	noTimes.LastUpdateTime, noTimes.LastTransitionTime = api.Time{}, api.Time{}
	for _, tc := range []struct {
		csr     *api.CertificateSigningRequest
		deleted bool
		requeue time.Duration // 0: not looked at again
	}{
		{csr("issued-61m", ago(2*time.Hour), valid, cond(api.CertificateApproved, ago(61*time.Minute))), true, 0},
		{csr("issued-59m", ago(2*time.Hour), valid, cond(api.CertificateApproved, ago(59*time.Minute))), false, time.Minute},
		{csr("issued-expired", ago(2*time.Minute), expired, cond(api.CertificateApproved, ago(time.Minute))), true, 0},
		{csr("approved-not-issued", ago(48*time.Hour), nil, cond(api.CertificateApproved, ago(47*time.Hour))), false, 0},
		{csr("denied-61m", ago(2*time.Hour), nil, cond(api.CertificateDenied, ago(61*time.Minute))), true, 0},
		{csr("denied-10m", ago(2*time.Hour), nil, cond(api.CertificateDenied, ago(10*time.Minute))), false, 50 * time.Minute},
		{csr("denied-no-times", ago(2*time.Hour), nil, noTimes), true, 0}, // counts from its creation
		{csr("failed-61m", ago(2*time.Hour), nil, cond(api.CertificateApproved, ago(62*time.Minute)), cond(api.CertificateFailed, ago(61*time.Minute))), true, 0},
		{csr("pending-25h", ago(25*time.Hour), nil), true, 0},
		{csr("pending-23h", ago(23*time.Hour), nil), false, time.Hour},
	} {
		t.Run(tc.csr.Name, func(t *testing.T) {
			c := fake.New(tc.csr)
			r := NewCSRCleanerController(c, newStaticLister(tc.csr), testLogger(t))
			r.now = func() time.Time { return now }
			err := r.Reconcile(context.Background(), tc.csr.Name)
			var rq *client.RequeueAfterError
			switch {
			case tc.requeue == 0 && err != nil:
				t.Fatalf("reconcile: %v", err)
			case tc.requeue != 0 && (!errors.As(err, &rq) || rq.After != tc.requeue):
				t.Fatalf("reconcile: %v, want a requeue after %s", err, tc.requeue)
			}
			w := writes(c)
			if tc.deleted != (len(w) == 1) || len(w) > 1 {
				t.Fatalf("writes %v, want deleted=%v", w, tc.deleted)
			}
			if _, err := c.Get(context.Background(), csrKind(), "", tc.csr.Name); tc.deleted != api.IsNotFound(err) {
				t.Fatalf("after reconcile: get: %v, want deleted=%v", err, tc.deleted)
			}
		})
	}
}

// testCertificate is a self-signed client certificate valid until
// notAfter, PEM-encoded as status.certificate holds it.
func testCertificate(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
