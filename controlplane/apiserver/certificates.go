package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
	"skiff.dev/skiff/pki"
)

// # CertificateSigningRequests (certificates.k8s.io/v1)
//
// As in Kubernetes, and with its admission plugins' words:
//
//   - on create, spec.username, uid and groups become the requester's
//     (what the client sent is replaced), and a request for
//     kubernetes.io/kube-apiserver-client naming the group system:masters
//     is refused (CertificateSubjectRestriction): "use of
//     kubernetes.io/kube-apiserver-client signer with system:masters
//     group is not allowed";
//   - PUT .../approval changes only the Approved and Denied conditions,
//     and only for someone with the approve verb on the request's signer
//     (resource signers, resourceNames the signer name or
//     "kubernetes.io/*"; CertificateApproval): `kubectl certificate
//     approve` needs RBAC's update on certificatesigningrequests/approval
//     and that;
//   - PUT .../status sets the certificate only for someone with the sign
//     verb on the signer (CertificateSigning); skiff's signer runs in the
//     control plane (controllers/csrsigning.go) and writes in process.

var csrKind = api.MustKindOf(&api.CertificateSigningRequest{})

// admitCSRCreate fills in the requester and applies the subject restriction.
func admitCSRCreate(ctx context.Context, k *api.Kind, obj api.Object) error {
	c, ok := obj.(*api.CertificateSigningRequest)
	if !ok {
		return nil
	}
	c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
	if u, ok := UserFrom(ctx); ok {
		c.Spec.Username, c.Spec.UID, c.Spec.Groups = u.Name, u.UID, slices.Clone(u.Groups)
	}
	if c.Spec.SignerName != api.SignerKubeAPIServerClient {
		return nil
	}
	if req, err := api.ParseCSR(c.Spec.Request); err == nil && slices.Contains(req.Subject.Organization, pki.MastersGroup) {
		return forbidden(k, c.Name, fmt.Sprintf("use of %s signer with %s group is not allowed", api.SignerKubeAPIServerClient, pki.MastersGroup))
	}
	return nil
}

// signerAllowed reports whether the request's user has verb (approve,
// sign) on signer, as Kubernetes' certificates admission asks: the exact
// name, or DOMAIN/*.
func (r *Registry) signerAllowed(ctx context.Context, verb, signer string) (bool, error) {
	u, ok := UserFrom(ctx)
	s := r.authorizer.Load()
	if !ok || s == nil {
		return true, nil // in process: the control plane itself
	}
	names := []string{signer}
	if domain, _, ok := strings.Cut(signer, "/"); ok {
		names = append(names, domain+"/*")
	}
	for _, n := range names {
		ok, _, err := s.authorize(ctx, attributes{user: u, verb: verb, resourceRequest: true, group: api.CertificatesGroup, resource: "signers", name: n})
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// UpdateApproval sets the Approved and Denied conditions of a request
// (the approval subresource), nothing else.
func (r *Registry) UpdateApproval(ctx context.Context, in *api.CertificateSigningRequest) (api.Object, error) {
	m := in.GetObjectMeta()
	if err := normalizeResourceVersion(m); err != nil {
		return nil, err
	}
	var dryOut api.Object
	out, err := r.store.GuaranteedUpdate(ctx, csrKind, "", m.Name, func(cur api.Object) (api.Object, error) {
		if err := strategy.CheckPrecondition(csrKind, cur, m.UID, m.ResourceVersion); err != nil {
			return nil, err
		}
		c := cur.(*api.CertificateSigningRequest)
		next := api.Clone(c)
		next.Status.Conditions = nil
		for _, cond := range c.Status.Conditions { // the signer's stay
			if cond.Type != api.CertificateApproved && cond.Type != api.CertificateDenied {
				next.Status.Conditions = append(next.Status.Conditions, cond)
			}
		}
		changed := false
		now := api.Now()
		for _, cond := range in.Status.Conditions {
			if cond.Type == api.CertificateApproved || cond.Type == api.CertificateDenied {
				old := api.CSRCondition(c, cond.Type)
				// As Kubernetes' strategy: a condition without times gets
				// now, its transition time kept where it did not change
				// (the CSR cleaner counts from them).
				if cond.LastUpdateTime.IsZero() {
					cond.LastUpdateTime = now
				}
				if cond.LastTransitionTime.IsZero() {
					cond.LastTransitionTime = now
					if old != nil && old.Status == cond.Status && !old.LastTransitionTime.IsZero() {
						cond.LastTransitionTime = old.LastTransitionTime
					}
				}
				next.Status.Conditions = append(next.Status.Conditions, cond)
				changed = changed || old == nil || old.Status != cond.Status
			}
		}
		if changed {
			ok, err := r.signerAllowed(ctx, "approve", c.Spec.SignerName)
			if err != nil {
				return nil, api.NewInternal(err)
			}
			if !ok {
				return nil, forbidden(csrKind, c.Name, fmt.Sprintf("user not permitted to approve requests with signerName %q", c.Spec.SignerName))
			}
		}
		if errs := api.ValidateUpdate(next, c); len(errs) > 0 {
			return nil, api.NewInvalid(csrKind, c.Name, errs)
		}
		if isDryRun(ctx) {
			dryOut = next
			return nil, errDryRun
		}
		return next, nil
	})
	if errors.Is(err, errDryRun) {
		return withTypeMeta(csrKind, dryOut), nil
	}
	if err != nil {
		return nil, err
	}
	return withTypeMeta(csrKind, out), nil
}

// admitCSRStatus: only a signer sets the certificate.
func (r *Registry) admitCSRStatus(ctx context.Context, next, cur api.Object) error {
	n, ok := next.(*api.CertificateSigningRequest)
	if !ok {
		return nil
	}
	if string(n.Status.Certificate) == string(cur.(*api.CertificateSigningRequest).Status.Certificate) {
		return nil
	}
	ok, err := r.signerAllowed(ctx, "sign", n.Spec.SignerName)
	if err != nil {
		return api.NewInternal(err)
	}
	if !ok {
		return forbidden(csrKind, n.Name, fmt.Sprintf("user not permitted to sign requests with signerName %q", n.Spec.SignerName))
	}
	return nil
}

// serveApproval answers PUT .../certificatesigningrequests/NAME/approval.
func (s *Server) serveApproval(ctx context.Context, w http.ResponseWriter, info *requestInfo, body []byte) {
	obj, err := decodeObjectCtx(ctx, csrKind, body, "", info.name)
	if err == nil {
		obj, err = s.reg.UpdateApproval(ctx, obj.(*api.CertificateSigningRequest))
	}
	respond(w, http.StatusOK, obj, err)
}
