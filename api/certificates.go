package api

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
)

// certificates.k8s.io/v1: a CertificateSigningRequest asks the cluster to
// sign a public key (a PEM "CERTIFICATE REQUEST" in spec.request) with a
// named signer. Someone allowed to approve for that signer approves it
// (`kubectl certificate approve NAME`: the approval subresource, an
// Approved condition) or denies it; the signer then issues the
// certificate into status.certificate, or records why not (Failed). skiff
// signs for kubernetes.io/kube-apiserver-client: client certificates for
// the API server, CN the user and O the groups (`skiff kubeconfig --user`
// goes this way, and a student may send their own key's request).

// CertificatesGroup is the API group of CertificateSigningRequests.
const CertificatesGroup = "certificates.k8s.io"

// Signer names and condition types, as Kubernetes spells them.
const (
	// SignerKubeAPIServerClient issues client certificates the API server
	// honours (any CN and O, but not system:masters: admission refuses it).
	SignerKubeAPIServerClient = "kubernetes.io/kube-apiserver-client"
	// SignerKubeAPIServerClientKubelet issues nodes' client certificates
	// (skiff's agents get theirs at join: no signer runs for it).
	SignerKubeAPIServerClientKubelet = "kubernetes.io/kube-apiserver-client-kubelet"
	// SignerKubeletServing issues kubelets' serving certificates (idem).
	SignerKubeletServing = "kubernetes.io/kubelet-serving"

	CertificateApproved = "Approved"
	CertificateDenied   = "Denied"
	CertificateFailed   = "Failed"
)

// CertificateSigningRequest asks for a certificate.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type CertificateSigningRequest struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the request; it cannot change.
	Spec CertificateSigningRequestSpec `json:"spec"`
	// Status holds the approval conditions and the issued certificate.
	Status CertificateSigningRequestStatus `json:"status,omitempty"`
}

// CertificateSigningRequestSpec is what is asked, and by whom.
type CertificateSigningRequestSpec struct {
	// Request is a PEM "CERTIFICATE REQUEST" block (base64 in JSON).
	Request []byte `json:"request"`
	// SignerName names the signer asked: kubernetes.io/kube-apiserver-client.
	SignerName string `json:"signerName"`
	// ExpirationSeconds is the validity asked for (at least 600); the
	// signer may give less (skiff: at most a year, its leaves' validity).
	ExpirationSeconds *int32 `json:"expirationSeconds,omitempty"`
	// Usages asked: "client auth" (required by kube-apiserver-client),
	// "digital signature", "key encipherment".
	Usages []string `json:"usages,omitempty"`
	// Username, UID, Groups and Extra are who created the request, set by
	// the server (what a client sends is replaced).
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// CertificateSigningRequestStatus is the answer.
type CertificateSigningRequestStatus struct {
	// Conditions: Approved or Denied (one of them, set through the
	// approval subresource), Failed (set by the signer).
	Conditions []CertificateSigningRequestCondition `json:"conditions,omitempty"`
	// Certificate is the issued certificate, PEM (base64 in JSON).
	Certificate []byte `json:"certificate,omitempty"`
}

// CertificateSigningRequestCondition is one condition of a request.
type CertificateSigningRequestCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastUpdateTime     Time   `json:"lastUpdateTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
}

// keyUsages Kubernetes knows (certificates/v1 KeyUsage).
var keyUsages = []string{"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
	"data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth", "client auth",
	"code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping",
	"ocsp signing", "microsoft sgc", "netscape sgc"}

// ParseCSR reads the PEM certificate request of a CSR and checks its
// signature.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("PEM block type must be CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, err
	}
	return csr, nil
}

// validateCSR follows pkg/apis/certificates/validation.
func validateCSR(c *CertificateSigningRequest) FieldErrors {
	errs := validateMeta(&c.ObjectMeta, false, validateRBACName)
	if len(c.Spec.Request) == 0 {
		errs = append(errs, Required("spec.request", ""))
	} else if _, err := ParseCSR(c.Spec.Request); err != nil {
		errs = append(errs, Invalid("spec.request", "<omitted>", err.Error()))
	}
	if c.Spec.SignerName == "" {
		errs = append(errs, Required("spec.signerName", ""))
	} else if !validSignerName(c.Spec.SignerName) {
		errs = append(errs, Invalid("spec.signerName", c.Spec.SignerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'"))
	}
	if e := c.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, Invalid("spec.expirationSeconds", *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	if len(c.Spec.Usages) == 0 {
		errs = append(errs, Required("spec.usages", "usages must be provided"))
	}
	seen := map[string]bool{}
	for i, u := range c.Spec.Usages {
		switch {
		case !slices.Contains(keyUsages, u):
			errs = append(errs, NotSupported(fmt.Sprintf("spec.usages[%d]", i), u, keyUsages...))
		case seen[u]:
			errs = append(errs, Duplicate(fmt.Sprintf("spec.usages[%d]", i), u))
		}
		seen[u] = true
	}
	approved, denied := false, false
	for i, cond := range c.Status.Conditions {
		p := fmt.Sprintf("status.conditions[%d]", i)
		switch cond.Type {
		case "":
			errs = append(errs, Required(p+".type", ""))
		case CertificateApproved:
			approved = true
		case CertificateDenied:
			denied = true
		}
		if cond.Status == "" {
			errs = append(errs, Required(p+".status", ""))
		} else if cond.Status != ConditionTrue && cond.Status != ConditionFalse && cond.Status != ConditionUnknown {
			errs = append(errs, NotSupported(p+".status", cond.Status, ConditionTrue, ConditionFalse, ConditionUnknown))
		}
	}
	if approved && denied {
		errs = append(errs, Invalid("status.conditions", CertificateDenied, "Approved and Denied conditions are mutually exclusive"))
	}
	return errs
}

// validSignerName: DOMAIN/PATH, as Kubernetes' ValidateSignerName in
// short: a domain with a dot, a slash, a non-empty path.
func validSignerName(s string) bool {
	i := slices.Index([]byte(s), '/')
	if i <= 0 || i == len(s)-1 {
		return false
	}
	domain := s[:i]
	return slices.Contains([]byte(domain), '.')
}

// validateCSRUpdate: the spec cannot change.
func validateCSRUpdate(n, o *CertificateSigningRequest) FieldErrors {
	a, b := n.Spec, o.Spec
	if string(a.Request) != string(b.Request) || a.SignerName != b.SignerName || !slices.Equal(a.Usages, b.Usages) ||
		a.Username != b.Username || !slices.Equal(a.Groups, b.Groups) || a.UID != b.UID ||
		(a.ExpirationSeconds == nil) != (b.ExpirationSeconds == nil) || (a.ExpirationSeconds != nil && *a.ExpirationSeconds != *b.ExpirationSeconds) {
		return FieldErrors{Invalid("spec", "<omitted>", "field is immutable")}
	}
	return nil
}

// CSRCondition returns the condition of type t of a request, or nil.
func CSRCondition(c *CertificateSigningRequest, t string) *CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}
