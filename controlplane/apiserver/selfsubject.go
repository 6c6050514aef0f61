package apiserver

import (
	"net/http"
	"slices"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

// The review kinds (api.ReviewKinds): created, answered from the request's
// user and the authorizer (authz.go), never stored.
//
//	POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews  kubectl auth can-i
//	POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews   kubectl auth can-i --list
//	POST /apis/authentication.k8s.io/v1/selfsubjectreviews       kubectl auth whoami

// servedKinds is every kind the API serves: the stored ones and the
// create-only review kinds (parseRequest and discovery resolve both).
var servedKinds = slices.Concat(api.Kinds, api.ReviewKinds)

// reviewKind returns the review kind of group and resource, or nil.
func reviewKind(group, resource string) *api.Kind {
	for _, k := range api.ReviewKinds {
		if k.Group == group && k.Resource == resource {
			return k
		}
	}
	return nil
}

// serveReview answers a create of a review kind.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	k := info.kind
	if info.verb != "create" || info.name != "" || info.sub != "" {
		writeError(w, methodNotAllowed(info.verb, k))
		return
	}
	body, err := s.readBody(w, r)
	if err == nil && isProtobuf(r) {
		body, err = protobufToJSON(body) // protobuf.go: kubectl sends the reviews so
	}
	if err != nil {
		writeError(w, err)
		return
	}
	obj, err := decodeObject(k, body, "", "")
	if err != nil {
		writeError(w, err)
		return
	}
	u, _ := UserFrom(r.Context())
	switch o := obj.(type) {
	case *api.SelfSubjectAccessReview:
		err = s.answerAccessReview(r, u, o)
	case *api.SelfSubjectRulesReview:
		err = answerRulesReview(u, o)
	case *api.SelfSubjectReview:
		o.Status.UserInfo = api.UserInfo{Username: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups)}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, withTypeMeta(k, obj))
}

// answerAccessReview fills in the status of a SelfSubjectAccessReview
// from the same decision a request would get.
func (s *Server) answerAccessReview(r *http.Request, u User, o *api.SelfSubjectAccessReview) error {
	ra, na := o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes
	var errs api.FieldErrors
	switch {
	case ra != nil && na != nil:
		errs = append(errs, api.Invalid("spec.nonResourceAttributes", na, "cannot be specified in combination with resourceAttributes"))
	case ra == nil && na == nil:
		errs = append(errs, api.Invalid("spec.resourceAttributes", nil, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if len(errs) > 0 {
		return api.NewInvalid(api.ReviewKinds[0], "", errs)
	}
	a := attributes{user: u}
	if ra != nil {
		a.resourceRequest = true
		a.verb, a.group, a.version, a.resource = ra.Verb, ra.Group, ra.Version, ra.Resource
		a.sub, a.namespace, a.name = ra.Subresource, ra.Namespace, ra.Name
	} else {
		a.verb, a.path = na.Verb, na.Path
	}
	ok, reason, err := s.authorize(r.Context(), a)
	o.Status = api.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}
	if err != nil {
		o.Status.EvaluationError = err.Error()
	}
	return nil
}

// answerRulesReview lists the user's rules in a namespace, as
// kube-apiserver's SelfSubjectRulesReview: a listing for people, not the
// decision (a node's rules depend on its pods, so its list is incomplete).
func answerRulesReview(u User, o *api.SelfSubjectRulesReview) error {
	ns := o.Spec.Namespace
	if ns == "" {
		return api.NewBadRequest("no namespace on request")
	}
	all := []string{"*"}
	st := api.SubjectRulesReviewStatus{
		ResourceRules: []api.ResourceRule{
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
		},
		NonResourceRules: []api.NonResourceRule{
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}},
		},
	}
	if u.InGroup(pki.MastersGroup) {
		st.ResourceRules = append(st.ResourceRules, api.ResourceRule{Verbs: all, APIGroups: all, Resources: all})
		st.NonResourceRules = append(st.NonResourceRules, api.NonResourceRule{Verbs: all, NonResourceURLs: all})
	} else if node, ok := nodeOf(u); ok {
		read := []string{"get", "list", "watch"}
		st.ResourceRules = append(st.ResourceRules,
			api.ResourceRule{Verbs: read, APIGroups: []string{""}, Resources: []string{"nodes", "services", "endpoints"}},
			api.ResourceRule{Verbs: read, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
			api.ResourceRule{Verbs: []string{"update", "patch", "delete"}, APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, ResourceNames: []string{node}},
			api.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
			api.ResourceRule{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
		)
		if ns == NodeLeaseNamespace {
			st.ResourceRules = append(st.ResourceRules,
				api.ResourceRule{Verbs: []string{"get", "update", "patch", "delete"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{node}},
				api.ResourceRule{Verbs: []string{"create"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}})
		}
		// The pods bound to the node and what they use are per object.
		st.Incomplete = true
		st.EvaluationError = "node authorizer does not support user rule resolution"
	} else if sa, _, ok := serviceAccountOf(u); ok && sa == ns {
		st.ResourceRules = append(st.ResourceRules, api.ResourceRule{Verbs: all, APIGroups: all, Resources: all})
	}
	o.Status = st
	return nil
}
