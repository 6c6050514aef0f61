package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

// UserCertificateRequest is what RequestUserCertificate asks for.
type UserCertificateRequest struct {
	// User is the certificate's CN; Groups its O.
	User   string
	Groups []string
	// Expiration is the validity asked for (0: the signer's maximum, a
	// year; at least 10 minutes otherwise, as Kubernetes requires).
	Expiration time.Duration
	// Timeout bounds the wait for the signer (0: 30 seconds).
	Timeout time.Duration
}

// RequestUserCertificate gets a client certificate for a user through the
// CertificateSigningRequest API, as a teacher would with kubectl: it makes
// a key here (it never leaves this machine), creates a request for the
// signer kubernetes.io/kube-apiserver-client, approves it (`kubectl
// certificate approve`: the caller needs approve on that signer), and
// waits until the control plane's signer has issued the certificate. It
// returns the certificate and the key, PEM, and the request's name.
func RequestUserCertificate(ctx context.Context, c *Client, r UserCertificateRequest) (certPEM, keyPEM []byte, name string, err error) {
	if r.Expiration != 0 && r.Expiration < 10*time.Minute {
		return nil, nil, "", fmt.Errorf("expiration %v: at least 10m (Kubernetes' shortest)", r.Expiration)
	}
	if why := pki.Reserved(r.User, r.Groups); why != "" {
		return nil, nil, "", errors.New(why)
	}
	csrPEM, keyPEM, err := pki.NewUserRequest(r.User, r.Groups)
	if err != nil {
		return nil, nil, "", err
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	csr := &api.CertificateSigningRequest{
		ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("user-%s-%s", sanitize(r.User), hex.EncodeToString(suffix))},
		Spec: api.CertificateSigningRequestSpec{Request: csrPEM, SignerName: api.SignerKubeAPIServerClient,
			Usages: []string{"client auth"}},
	}
	if r.Expiration > 0 {
		secs := int32(min(r.Expiration/time.Second, 1<<31-1))
		csr.Spec.ExpirationSeconds = &secs
	}
	created, err := Create(ctx, c, csr)
	if err != nil {
		return nil, nil, "", fmt.Errorf("create the certificate signing request: %w", err)
	}
	name = created.Name
	if err := Approve(ctx, c, created, true, "SkiffKubeconfig", "This CSR was approved by skiff kubeconfig --user."); err != nil {
		return nil, nil, name, err
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	cert, err := waitCertificate(ctx, c, name, timeout)
	if err != nil {
		return nil, nil, name, err
	}
	return cert, keyPEM, name, nil
}

// Approve sets the Approved (approve true) or Denied condition of a
// request through its approval subresource, as `kubectl certificate
// approve|deny` does.
func Approve(ctx context.Context, c *Client, csr *api.CertificateSigningRequest, approve bool, reason, message string) error {
	next := api.Clone(csr)
	t := api.CertificateDenied
	if approve {
		t = api.CertificateApproved
	}
	now := api.Now()
	next.Status.Conditions = append(next.Status.Conditions, api.CertificateSigningRequestCondition{Type: t, Status: api.ConditionTrue,
		Reason: reason, Message: message, LastUpdateTime: now, LastTransitionTime: now})
	body, err := json.Marshal(next)
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, http.MethodPut, PathFor(api.MustKindOf(csr), "", csr.Name, "approval"), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("approve certificate signing request %s: %w", csr.Name, err)
	}
	resp.Body.Close()
	return nil
}

// waitCertificate watches request name until it holds a certificate, or
// is denied or failed.
func waitCertificate(ctx context.Context, c Interface, name string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kind := api.MustKindOf(&api.CertificateSigningRequest{})
	w, err := c.Watch(ctx, kind, "", api.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, fmt.Errorf("watch certificate signing request %s: %w", name, err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		csr, ok := ev.Object.(*api.CertificateSigningRequest)
		if !ok || ev.Type == api.Deleted {
			continue
		}
		if len(csr.Status.Certificate) > 0 {
			return csr.Status.Certificate, nil
		}
		for _, t := range []string{api.CertificateDenied, api.CertificateFailed} {
			if cond := api.CSRCondition(csr, t); cond != nil && cond.Status == api.ConditionTrue {
				return nil, fmt.Errorf("certificate signing request %s: %s: %s", name, t, cond.Message)
			}
		}
	}
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	return nil, fmt.Errorf("certificate signing request %s: not signed within %v (does a control plane run its signer?): %w", name, timeout, ctx.Err())
}

// sanitize keeps a user name usable in an object name.
func sanitize(s string) string {
	out := make([]byte, 0, len(s))
	for _, b := range []byte(s) {
		switch {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '-', b == '.':
			out = append(out, b)
		case b >= 'A' && b <= 'Z':
			out = append(out, b+'a'-'A')
		default:
			out = append(out, '-')
		}
	}
	if len(out) > 200 {
		out = out[:200]
	}
	return string(out)
}
