package api

import "reflect"

// Review kinds: a client creates one and reads the answer in its status;
// nothing is stored (authorization.k8s.io/v1 and authentication.k8s.io/v1,
// as Kubernetes). `kubectl auth can-i` sends a SelfSubjectAccessReview
// (`--list` a SelfSubjectRulesReview); `kubectl auth whoami` a
// SelfSubjectReview.

// SelfSubjectAccessReview asks whether the requesting user may do one
// thing: a resource request (resourceAttributes) or a non-resource path
// (nonResourceAttributes), exactly one of them.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type SelfSubjectAccessReview struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the question.
	Spec SelfSubjectAccessReviewSpec `json:"spec"`
	// Status is the answer, filled in by the server.
	Status SubjectAccessReviewStatus `json:"status,omitempty"`
}

// SelfSubjectAccessReviewSpec names the request to check.
type SelfSubjectAccessReviewSpec struct {
	// ResourceAttributes describe a request for an API resource.
	ResourceAttributes *ResourceAttributes `json:"resourceAttributes,omitempty"`
	// NonResourceAttributes describe a request for another path.
	NonResourceAttributes *NonResourceAttributes `json:"nonResourceAttributes,omitempty"`
}

// ResourceAttributes are the parts of a resource request an authorizer
// sees. "*" means all (verbs, groups, resources), as Kubernetes; an empty
// namespace with a namespaced resource means all namespaces.
type ResourceAttributes struct {
	// Namespace of the request; "" is all namespaces (or a cluster-scoped resource).
	Namespace string `json:"namespace,omitempty"`
	// Verb: get, list, watch, create, update, patch, delete, deletecollection, or "*".
	Verb string `json:"verb,omitempty"`
	// Group of the resource ("" the core group), or "*".
	Group string `json:"group,omitempty"`
	// Version of the resource, or "*" (ignored by skiff's authorizer).
	Version string `json:"version,omitempty"`
	// Resource: the plural name ("pods"), or "*".
	Resource string `json:"resource,omitempty"`
	// Subresource: "status", "log", "exec", ... or "".
	Subresource string `json:"subresource,omitempty"`
	// Name of one object; "" is all objects.
	Name string `json:"name,omitempty"`
}

// NonResourceAttributes are a request for a path that is no API resource
// (/healthz, /metrics, /version, ...).
type NonResourceAttributes struct {
	// Path of the request.
	Path string `json:"path,omitempty"`
	// Verb: the HTTP method, lowercased (get, post, ...).
	Verb string `json:"verb,omitempty"`
}

// SubjectAccessReviewStatus is the answer.
type SubjectAccessReviewStatus struct {
	// Allowed says whether the request would be allowed.
	Allowed bool `json:"allowed"`
	// Denied is true when the authorizer refused outright (skiff's answer
	// is always allowed or denied; it never has "no opinion").
	Denied bool `json:"denied,omitempty"`
	// Reason says why, when there is more to say than yes or no.
	Reason string `json:"reason,omitempty"`
	// EvaluationError: the check could not be completed (a store error).
	EvaluationError string `json:"evaluationError,omitempty"`
}

// SubjectAccessReview asks whether a given user (spec.user, spec.groups)
// may do one thing: what a component that authorizes for others asks
// (kube-apiserver's webhook authorizers; `kubectl auth can-i --as` goes
// through impersonation instead). Creating one is cluster-admin's
// (system:auth-delegator's) to do.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type SubjectAccessReview struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec is the question.
	Spec SubjectAccessReviewSpec `json:"spec"`
	// Status is the answer, filled in by the server.
	Status SubjectAccessReviewStatus `json:"status,omitempty"`
}

// SubjectAccessReviewSpec names the request and who makes it.
type SubjectAccessReviewSpec struct {
	// ResourceAttributes describe a request for an API resource.
	ResourceAttributes *ResourceAttributes `json:"resourceAttributes,omitempty"`
	// NonResourceAttributes describe a request for another path.
	NonResourceAttributes *NonResourceAttributes `json:"nonResourceAttributes,omitempty"`
	// User and Groups are who asks (at least one is required).
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// UID of the user (kept for the shape).
	UID string `json:"uid,omitempty"`
	// Extra is kept for the shape; skiff's authorizers read none.
	Extra map[string][]string `json:"extra,omitempty"`
}

// SelfSubjectRulesReview lists what the requesting user may do in a
// namespace.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type SelfSubjectRulesReview struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec names the namespace.
	Spec SelfSubjectRulesReviewSpec `json:"spec"`
	// Status is the answer, filled in by the server.
	Status SubjectRulesReviewStatus `json:"status,omitempty"`
}

// SelfSubjectRulesReviewSpec names the namespace to list the rules of.
type SelfSubjectRulesReviewSpec struct {
	// Namespace to evaluate the rules in. Required.
	Namespace string `json:"namespace,omitempty"`
}

// SubjectRulesReviewStatus lists the rules. As in Kubernetes, the list is
// for display: it may be incomplete (Incomplete true) where a rule
// depends on the object (a node's pods' secrets), and the authoritative
// answer is a SelfSubjectAccessReview.
type SubjectRulesReviewStatus struct {
	// ResourceRules allowed on API resources.
	ResourceRules []ResourceRule `json:"resourceRules"`
	// NonResourceRules allowed on other paths.
	NonResourceRules []NonResourceRule `json:"nonResourceRules"`
	// Incomplete is true when some allowed requests are not listed.
	Incomplete bool `json:"incomplete"`
	// EvaluationError says why the list is incomplete.
	EvaluationError string `json:"evaluationError,omitempty"`
}

// ResourceRule is one set of allowed resource requests.
type ResourceRule struct {
	Verbs     []string `json:"verbs"`
	APIGroups []string `json:"apiGroups,omitempty"`
	Resources []string `json:"resources,omitempty"`
	// ResourceNames limit the rule to these objects; empty is all.
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// NonResourceRule is one set of allowed non-resource requests.
type NonResourceRule struct {
	Verbs []string `json:"verbs"`
	// NonResourceURLs: paths, a trailing "*" a prefix.
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// SelfSubjectReview asks who the requesting user is
// (authentication.k8s.io/v1); the server fills in status.userInfo.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type SelfSubjectReview struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Status is the answer, filled in by the server.
	Status SelfSubjectReviewStatus `json:"status,omitempty"`
}

// SelfSubjectReviewStatus holds the user.
type SelfSubjectReviewStatus struct {
	UserInfo UserInfo `json:"userInfo,omitempty"`
}

// UserInfo is an authenticated user, as Kubernetes' authentication.k8s.io UserInfo.
type UserInfo struct {
	Username string   `json:"username,omitempty"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	// Extra is kept for the shape; skiff's authenticators set none.
	Extra map[string][]string `json:"extra,omitempty"`
}

// ReviewKinds are the create-only kinds above: served (POST only) and
// listed in discovery with the verb create, never stored, so they are
// not in Kinds (which the store, the CLI and `get all` iterate).
var ReviewKinds = []*Kind{
	{Kind: "SelfSubjectAccessReview", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", CreateOnly: true, Type: reflect.TypeFor[SelfSubjectAccessReview]()},
	{Kind: "SelfSubjectRulesReview", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview", CreateOnly: true, Type: reflect.TypeFor[SelfSubjectRulesReview]()},
	{Kind: "SelfSubjectReview", Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews", Singular: "selfsubjectreview", CreateOnly: true, Type: reflect.TypeFor[SelfSubjectReview]()},
	{Kind: "SubjectAccessReview", Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews", Singular: "subjectaccessreview", CreateOnly: true, Type: reflect.TypeFor[SubjectAccessReview]()},
}
