package controllers

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The CSR cleaner deletes CertificateSigningRequests that have done their
// work, as kube-controller-manager's csrcleaner: a request is an
// exchange, not a record, and a lab room where forty students each ask
// for a certificate (skiff classroom create) would otherwise keep them
// all. Deleted, with Kubernetes' deadlines:
//   - issued (it holds a certificate) and approved more than an hour ago;
//   - denied, or failed, more than an hour ago (the condition's
//     lastUpdateTime);
//   - pending (neither approved nor denied) and created more than a day
//     ago;
//   - issued and its certificate has expired.
//
// The certificate itself stays valid until it expires: deleting the
// request revokes nothing (Kubernetes has no revocation either; a
// student's access is taken away by deleting their RoleBindings).
// Until a deadline passes, the request is looked at again when it does.
type CSRCleanerController struct {
	client client.Interface
	csrs   Lister // *api.CertificateSigningRequest
	log    *slog.Logger
	now    func() time.Time
}

const csrCleanerControllerName = "csrcleaner"

// Kubernetes' deadlines (pkg/controller/certificates/cleaner).
const (
	csrApprovedExpiration = time.Hour
	csrDeniedExpiration   = time.Hour
	csrPendingExpiration  = 24 * time.Hour
)

// NewCSRCleanerController returns the cleaner over a cache of requests.
func NewCSRCleanerController(c client.Interface, csrs Lister, log *slog.Logger) *CSRCleanerController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CSRCleanerController{client: c, csrs: csrs, log: log.With("controller", csrCleanerControllerName), now: time.Now}
}

// Reconcile implements client.Reconciler for a request's name.
func (r *CSRCleanerController) Reconcile(ctx context.Context, key string) error {
	csr, ok := getAs[*api.CertificateSigningRequest](r.csrs, "", key)
	if !ok || csr.DeletionTimestamp != nil {
		return nil
	}
	why, wait := r.expired(csr)
	if why == "" {
		if wait > 0 {
			return client.RequeueAfter(wait)
		}
		return nil
	}
	uid := csr.UID
	err := r.client.Delete(ctx, csrKind(), "", csr.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
	if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
		return fmt.Errorf("certificatesigningrequest %s: delete: %w", key, err)
	}
	logReconcile(r.log, true, key, why, "gone", "deleted the request")
	return nil
}

// expired says why the request is due for deletion, or, when it is not,
// how long until it is (0: never, as things stand).
func (r *CSRCleanerController) expired(csr *api.CertificateSigningRequest) (string, time.Duration) {
	now := r.now()
	next := time.Duration(0)
	due := func(since time.Time, after time.Duration) bool {
		left := since.Add(after).Sub(now)
		if left <= 0 {
			return true
		}
		if next == 0 || left < next {
			next = left
		}
		return false
	}
	approved := api.CSRCondition(csr, api.CertificateApproved)
	denied := api.CSRCondition(csr, api.CertificateDenied)
	failed := api.CSRCondition(csr, api.CertificateFailed)
	if len(csr.Status.Certificate) > 0 {
		if notAfter, ok := certificateNotAfter(csr.Status.Certificate); ok && due(notAfter, 0) {
			return "its certificate expired at " + notAfter.UTC().Format(time.RFC3339), 0
		}
		if approved != nil && due(conditionTime(csr, approved), csrApprovedExpiration) {
			return "issued, approved more than 1h ago", 0
		}
	}
	if denied != nil && due(conditionTime(csr, denied), csrDeniedExpiration) {
		return "denied more than 1h ago", 0
	}
	if failed != nil && due(conditionTime(csr, failed), csrDeniedExpiration) {
		return "failed more than 1h ago", 0
	}
	if approved == nil && denied == nil && due(csr.CreationTimestamp.Time, csrPendingExpiration) {
		return "pending for more than 24h", 0
	}
	return "", next
}

// conditionTime is when a condition was last updated: its transition
// time where a writer left lastUpdateTime out, the request's creation
// where both are missing (the API server fills them in on approval, as
// Kubernetes' does; a request stored before that has neither).
func conditionTime(csr *api.CertificateSigningRequest, c *api.CertificateSigningRequestCondition) time.Time {
	switch {
	case !c.LastUpdateTime.IsZero():
		return c.LastUpdateTime.Time
	case !c.LastTransitionTime.IsZero():
		return c.LastTransitionTime.Time
	}
	return csr.CreationTimestamp.Time
}

// certificateNotAfter reads the first certificate of a PEM chain.
func certificateNotAfter(chain []byte) (time.Time, bool) {
	b, _ := pem.Decode(chain)
	if b == nil || b.Type != "CERTIFICATE" {
		return time.Time{}, false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}, false
	}
	return c.NotAfter, true
}
