package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The CSR signing controller issues the certificates of approved
// CertificateSigningRequests for kubernetes.io/kube-apiserver-client, as
// kube-controller-manager's csrsigning controller with the cluster CA: a
// request that is approved, neither denied nor failed and holds no
// certificate yet is checked (the usages this signer allows, a user name,
// no reserved name) and either signed (status.certificate, valid for
// spec.expirationSeconds, at most a year) or marked Failed with the
// reason. Requests for other signers are someone else's and stay as they
// are. Only approved requests are ever signed: approving is RBAC's approve
// verb on the signer (the API server's admission checks it).
type CSRSigningController struct {
	client client.Interface
	csrs   Lister // *api.CertificateSigningRequest
	signer CSRSigner
	log    *slog.Logger
	now    func() time.Time
}

// CSRSigner signs a client certificate for a request (pki.CA.SignClient).
// Safe for concurrent use.
type CSRSigner interface {
	SignClient(req *x509.CertificateRequest, validity time.Duration, now time.Time) ([]byte, error)
}

const csrSigningControllerName = "csrsigning-controller"

func csrKind() *api.Kind { return api.MustKindOf(&api.CertificateSigningRequest{}) }

// allowedClientUsages are what kubernetes.io/kube-apiserver-client
// signs: "client auth" required, these two besides allowed.
var allowedClientUsages = []string{"client auth", "digital signature", "key encipherment"}

// NewCSRSigningController returns the controller over a cache of requests.
func NewCSRSigningController(c client.Interface, csrs Lister, signer CSRSigner, log *slog.Logger) *CSRSigningController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CSRSigningController{client: c, csrs: csrs, signer: signer, log: log.With("controller", csrSigningControllerName), now: time.Now}
}

// Reconcile implements client.Reconciler for a request's name.
func (s *CSRSigningController) Reconcile(ctx context.Context, key string) error {
	csr, ok := getAs[*api.CertificateSigningRequest](s.csrs, "", key)
	if !ok || csr.Spec.SignerName != api.SignerKubeAPIServerClient || len(csr.Status.Certificate) > 0 {
		return nil
	}
	approved := api.CSRCondition(csr, api.CertificateApproved)
	if approved == nil || approved.Status != api.ConditionTrue || api.CSRCondition(csr, api.CertificateDenied) != nil || api.CSRCondition(csr, api.CertificateFailed) != nil {
		logReconcile(s.log, false, key, "not approved (or denied, or failed)", "nothing to sign", "none")
		return nil
	}
	next := api.Clone(csr)
	cert, why := s.sign(csr)
	if why != "" {
		now := api.Now()
		next.Status.Conditions = append(next.Status.Conditions, api.CertificateSigningRequestCondition{Type: api.CertificateFailed, Status: api.ConditionTrue,
			Reason: "SignerValidationFailure", Message: why, LastUpdateTime: now, LastTransitionTime: now})
	} else {
		next.Status.Certificate = cert
	}
	if _, err := s.client.UpdateStatus(ctx, next); err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return nil // changed or gone: its change enqueues it again
		}
		return fmt.Errorf("certificatesigningrequest %s: %w", key, err)
	}
	if why != "" {
		logReconcile(s.log, true, key, "approved", "not signed", "failed: "+why)
	} else {
		logReconcile(s.log, true, key, "approved", "signed", "issued a client certificate for "+csr.Spec.Username+"'s request")
	}
	return nil
}

// sign checks and signs a request: the certificate, or why not.
func (s *CSRSigningController) sign(csr *api.CertificateSigningRequest) ([]byte, string) {
	if !slices.Contains(csr.Spec.Usages, "client auth") {
		return nil, `invalid usage for client certificate: "client auth" is required`
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(allowedClientUsages, u) {
			return nil, fmt.Sprintf("invalid usage for client certificate: %s", u)
		}
	}
	req, err := api.ParseCSR(csr.Spec.Request)
	if err != nil {
		return nil, fmt.Sprintf("unable to parse csr %q: %v", csr.Name, err)
	}
	var validity time.Duration
	if e := csr.Spec.ExpirationSeconds; e != nil {
		validity = time.Duration(*e) * time.Second
	}
	cert, err := s.signer.SignClient(req, validity, s.now())
	if err != nil {
		return nil, err.Error()
	}
	return cert, ""
}
