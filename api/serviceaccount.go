package api

import (
	"fmt"
	"path"
	"slices"
)

// ServiceAccount is an identity for the processes of pods, as Kubernetes'
// (core/v1): a pod runs as one service account of its namespace
// (spec.serviceAccountName, "default" when it names none), and gets a
// short-lived token for it, signed by the control plane, mounted at
// /var/run/secrets/kubernetes.io/serviceaccount. Every namespace has a
// "default" one (the serviceaccount controller makes it).
//
// skiff supports automountServiceAccountToken; secrets (the legacy token
// Secrets) and imagePullSecrets are refused by path (strict.go).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ServiceAccount struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// AutomountServiceAccountToken: false stops pods of this account from
	// getting the API access volume (a pod's own field wins).
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
}

// TokenRequest asks for a token of a service account
// (authentication.k8s.io/v1): POST
// /api/v1/namespaces/NS/serviceaccounts/NAME/token. It is never stored:
// the answer carries the token in status.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type TokenRequest struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: audiences, lifetime and the object the token is bound to.
	Spec TokenRequestSpec `json:"spec"`
	// Status: the token and when it expires.
	Status TokenRequestStatus `json:"status,omitempty"`
}

// TokenRequestSpec is what a token is for.
type TokenRequestSpec struct {
	// Audiences the token is meant for; empty means the API server's own
	// (DefaultTokenAudience). The API server accepts only tokens meant for it.
	Audiences []string `json:"audiences"`
	// ExpirationSeconds is the token's lifetime (default 3600, at least 600).
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
	// BoundObjectRef binds the token to a pod: it stops working when that
	// pod is gone.
	BoundObjectRef *BoundObjectReference `json:"boundObjectRef,omitempty"`
}

// BoundObjectReference names the object a token is bound to.
type BoundObjectReference struct {
	// Kind: Pod (the only kind skiff binds to).
	Kind string `json:"kind,omitempty"`
	// APIVersion: v1.
	APIVersion string `json:"apiVersion,omitempty"`
	// Name of the pod, in the service account's namespace.
	Name string `json:"name,omitempty"`
	// UID of the pod; when given it must be the pod's.
	UID string `json:"uid,omitempty"`
}

// TokenRequestStatus is the issued token.
type TokenRequestStatus struct {
	// Token is the signed JWT.
	Token string `json:"token"`
	// ExpirationTimestamp is when it stops working.
	ExpirationTimestamp Time `json:"expirationTimestamp"`
}

// Service account names, paths and defaults, as Kubernetes spells them.
const (
	// DefaultServiceAccountName is the account of pods that name none.
	DefaultServiceAccountName = "default"
	// DefaultTokenExpirationSeconds is a TokenRequest's default lifetime
	// (authentication/v1 defaulting); MinTokenExpirationSeconds its least.
	DefaultTokenExpirationSeconds = 3600
	MinTokenExpirationSeconds     = 600
	// DefaultTokenAudience is the API server's audience and the tokens'
	// issuer (kube-apiserver's --service-account-issuer default in
	// kubeadm clusters).
	DefaultTokenAudience = "https://kubernetes.default.svc.cluster.local"
	// ServiceAccountMountPath is where a pod finds its token, ca.crt and
	// namespace (client-go's rest.InClusterConfig reads it).
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// APIAccessVolumePrefix + 5 random characters names the projected
	// volume admission adds ("kube-api-access-xxxxx").
	APIAccessVolumePrefix = "kube-api-access-"
	// RootCAConfigMap is the ConfigMap in every namespace holding the
	// cluster CA under key ca.crt (the root-ca publisher writes it).
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
	// KubeletTokenExpirationSeconds is the lifetime the kubelet asks for
	// an API access token: an hour and 7 s (the 7 s mark it as the
	// kubelet's, as in Kubernetes).
	KubeletTokenExpirationSeconds = 3607
)

// ServiceAccountNameOf is the account a pod runs as: serviceAccountName,
// else the deprecated serviceAccount, else "default".
func ServiceAccountNameOf(s *PodSpec) string {
	switch {
	case s.ServiceAccountName != "":
		return s.ServiceAccountName
	case s.DeprecatedServiceAccount != "":
		return s.DeprecatedServiceAccount
	}
	return DefaultServiceAccountName
}

// APIAccessVolume is the projected volume ServiceAccount admission adds to
// a pod (named name): the token (expiration 3607 s, path token), ca.crt
// from the kube-root-ca.crt ConfigMap and the namespace from the downward
// API, exactly as Kubernetes writes it.
func APIAccessVolume(name string) Volume {
	exp := int64(KubeletTokenExpirationSeconds)
	mode := int32(DefaultVolumeMode)
	return Volume{Name: name, Projected: &ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []VolumeProjection{
			{ServiceAccountToken: &ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &ConfigMapProjection{Name: RootCAConfigMap, Items: []KeyToPath{{Key: RootCAKey, Path: RootCAKey}}}},
			{DownwardAPI: &DownwardAPIProjection{Items: []DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}
}

// SetDefaultsTokenRequest applies authentication/v1 defaulting.
func SetDefaultsTokenRequest(tr *TokenRequest) {
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = ptr[int64](DefaultTokenExpirationSeconds)
	}
}

// ValidateTokenRequest checks a defaulted TokenRequest as Kubernetes'
// authentication validation does, and the bound object skiff supports.
func ValidateTokenRequest(tr *TokenRequest) FieldErrors {
	var errs FieldErrors
	if e := tr.Spec.ExpirationSeconds; e != nil {
		if *e < MinTokenExpirationSeconds {
			errs = append(errs, Invalid("spec.expirationSeconds", *e, "may not specify a duration less than 10 minutes"))
		}
		if *e > 1<<32 {
			errs = append(errs, Invalid("spec.expirationSeconds", *e, "may not specify a duration larger than 2^32 seconds"))
		}
	}
	for i, a := range tr.Spec.Audiences {
		if a == "" {
			errs = append(errs, Required(fmt.Sprintf("spec.audiences[%d]", i), "must not be empty"))
		}
	}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		if ref.Kind != "Pod" {
			errs = append(errs, NotSupported("spec.boundObjectRef.kind", ref.Kind, "Pod"))
		}
		if ref.APIVersion != "" && ref.APIVersion != "v1" {
			errs = append(errs, NotSupported("spec.boundObjectRef.apiVersion", ref.APIVersion, "v1"))
		}
		if ref.Name == "" {
			errs = append(errs, Required("spec.boundObjectRef.name", ""))
		}
	}
	return errs
}

func validateServiceAccount(sa *ServiceAccount) FieldErrors {
	return validateMeta(&sa.ObjectMeta, true, isDNS1123Subdomain)
}

// validateProjected checks a projected volume: the three sources skiff
// supports (serviceAccountToken, configMap, downwardAPI), one per entry,
// with relative paths that do not repeat (Kubernetes' rules and words).
func validateProjected(pv *ProjectedVolumeSource, p string) FieldErrors {
	var errs FieldErrors
	if pv.DefaultMode != nil {
		errs = validateMode(pv.DefaultMode, p+".defaultMode")
	}
	paths := map[string]bool{}
	// Every pod's API access volume is one: field paths are only joined
	// for an error.
	addPath := func(file string, fp func() string) {
		if file == "" {
			errs = append(errs, Required(fp(), ""))
			return
		}
		if !isLocalPath(file) {
			errs = append(errs, validateLocalPath(file, fp())...)
		}
		clean := path.Clean(file)
		if paths[clean] {
			errs = append(errs, Invalid(fp(), file, "conflicting duplicate paths"))
		}
		paths[clean] = true
	}
	if len(pv.Sources) == 0 {
		errs = append(errs, Required(p+".sources", ""))
	}
	for i, s := range pv.Sources {
		sp := func() string { return elemPath(p, ".sources", i) }
		n := 0
		if t := s.ServiceAccountToken; t != nil {
			n++
			tp := func() string { return sp() + ".serviceAccountToken" }
			if e := t.ExpirationSeconds; e != nil {
				if *e < MinTokenExpirationSeconds {
					errs = append(errs, Invalid(tp()+".expirationSeconds", *e, "may not specify a duration less than 10 minutes"))
				}
				if *e > 1<<32 {
					errs = append(errs, Invalid(tp()+".expirationSeconds", *e, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			addPath(t.Path, func() string { return tp() + ".path" })
		}
		if cm := s.ConfigMap; cm != nil {
			n++
			cp := sp() + ".configMap" // validateKeyToPaths joins its items' paths lazily
			if cm.Name == "" {
				errs = append(errs, Required(cp+".name", ""))
			}
			errs = append(errs, validateKeyToPaths(cm.Items, nil, cp)...)
			for _, it := range cm.Items {
				if it.Path != "" {
					addPath(it.Path, func() string { return cp + ".items.path" })
				}
			}
		}
		if d := s.DownwardAPI; d != nil {
			n++
			for j, it := range d.Items {
				ip := func() string { return fmt.Sprintf("%s.downwardAPI.items[%d]", sp(), j) }
				addPath(it.Path, func() string { return ip() + ".path" })
				if it.Mode != nil {
					errs = append(errs, validateMode(it.Mode, ip()+".mode")...)
				}
				switch {
				case it.FieldRef == nil:
					errs = append(errs, Required(ip()+".fieldRef", "skiff supports fieldRef items"))
				case !isDownwardVolumeField(it.FieldRef.FieldPath):
					errs = append(errs, NotSupported(ip()+".fieldRef.fieldPath", it.FieldRef.FieldPath, downwardVolumeFields...))
				}
			}
		}
		switch {
		case n == 0:
			errs = append(errs, Required(sp(), "must specify at least 1 volume type per source"))
		case n > 1:
			errs = append(errs, Forbidden(sp(), "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// downwardVolumeFields are the pod fields a downwardAPI file may hold.
var downwardVolumeFields = []string{"metadata.name", "metadata.namespace", "metadata.uid"}

func isDownwardVolumeField(f string) bool { return slices.Contains(downwardVolumeFields, f) }

// ProjectedVolumeSource puts several sources into one directory
// (Kubernetes' projected volume). skiff supports the three sources of the
// API access volume: serviceAccountToken, configMap and downwardAPI.
type ProjectedVolumeSource struct {
	// Sources, each exactly one kind.
	Sources []VolumeProjection `json:"sources"`
	// DefaultMode of the files (default 0644).
	DefaultMode *int32 `json:"defaultMode,omitempty"`
}

// VolumeProjection is one source of a projected volume.
type VolumeProjection struct {
	// ServiceAccountToken: a token of the pod's service account, bound to
	// the pod, refreshed by the node before it expires.
	ServiceAccountToken *ServiceAccountTokenProjection `json:"serviceAccountToken,omitempty"`
	// ConfigMap keys as files.
	ConfigMap *ConfigMapProjection `json:"configMap,omitempty"`
	// DownwardAPI: fields of the pod as files.
	DownwardAPI *DownwardAPIProjection `json:"downwardAPI,omitempty"`
}

// ServiceAccountTokenProjection is a token file.
type ServiceAccountTokenProjection struct {
	// Audience of the token (default: the API server's).
	Audience string `json:"audience,omitempty"`
	// ExpirationSeconds: the token's lifetime (default 3600, at least 600);
	// the node gets a new one at 80% of it.
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
	// Path of the file in the volume.
	Path string `json:"path"`
}

// ConfigMapProjection projects keys of a ConfigMap.
type ConfigMapProjection struct {
	// Name of the ConfigMap.
	Name string `json:"name"`
	// Items choose keys and their file paths; default: every key.
	Items []KeyToPath `json:"items,omitempty"`
	// Optional: a missing ConfigMap gives no files.
	Optional *bool `json:"optional,omitempty"`
}

// DownwardAPIProjection projects pod fields.
type DownwardAPIProjection struct {
	Items []DownwardAPIVolumeFile `json:"items,omitempty"`
}

// DownwardAPIVolumeFile is one file holding a pod field.
type DownwardAPIVolumeFile struct {
	// Path of the file.
	Path string `json:"path"`
	// FieldRef: metadata.name, metadata.namespace or metadata.uid.
	FieldRef *ObjectFieldSelector `json:"fieldRef,omitempty"`
	// Mode of the file.
	Mode *int32 `json:"mode,omitempty"`
}
