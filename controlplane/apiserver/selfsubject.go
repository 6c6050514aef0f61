package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver/authz"
	"skiff.dev/skiff/pki"
)

// The review kinds (api.ReviewKinds): created, answered from the request's
// user and the authorizer (authz.go), never stored.
//
//	POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews  kubectl auth can-i
//	POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews   kubectl auth can-i --list
//	POST /apis/authentication.k8s.io/v1/selfsubjectreviews       kubectl auth whoami
//	POST /apis/authorization.k8s.io/v1/subjectaccessreviews      may user U do X? (cluster-admin's question)

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
		err = s.answerRulesReview(r.Context(), u, o)
	case *api.SubjectAccessReview:
		err = s.answerSubjectAccessReview(r, o)
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
	st, err := s.review(r.Context(), u, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, api.ReviewKinds[0])
	o.Status = st
	return err
}

// answerSubjectAccessReview answers for the user the spec names.
func (s *Server) answerSubjectAccessReview(r *http.Request, o *api.SubjectAccessReview) error {
	if o.Spec.User == "" && len(o.Spec.Groups) == 0 {
		return api.NewInvalid(subjectAccessReviewKind, "", api.FieldErrors{api.Invalid("spec.user", o.Spec.User, "at least one of user or group must be specified")})
	}
	u := User{Name: o.Spec.User, UID: o.Spec.UID, Groups: slices.Clone(o.Spec.Groups)}
	st, err := s.review(r.Context(), u, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, subjectAccessReviewKind)
	o.Status = st
	return err
}

var subjectAccessReviewKind = reviewKind("authorization.k8s.io", "subjectaccessreviews")

// review decides a review's request for u.
func (s *Server) review(ctx context.Context, u User, ra *api.ResourceAttributes, na *api.NonResourceAttributes, k *api.Kind) (api.SubjectAccessReviewStatus, error) {
	var errs api.FieldErrors
	switch {
	case ra != nil && na != nil:
		errs = append(errs, api.Invalid("spec.nonResourceAttributes", na, "cannot be specified in combination with resourceAttributes"))
	case ra == nil && na == nil:
		errs = append(errs, api.Invalid("spec.resourceAttributes", nil, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if len(errs) > 0 {
		return api.SubjectAccessReviewStatus{}, api.NewInvalid(k, "", errs)
	}
	a := attributes{user: u}
	if ra != nil {
		a.resourceRequest = true
		a.verb, a.group, a.version, a.resource = ra.Verb, ra.Group, ra.Version, ra.Resource
		a.sub, a.namespace, a.name = ra.Subresource, ra.Namespace, ra.Name
	} else {
		a.verb, a.path = na.Verb, na.Path
	}
	ok, reason, err := s.authorize(ctx, a)
	st := api.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st, nil
}

// answerRulesReview lists the user's rules in a namespace, as
// kube-apiserver's SelfSubjectRulesReview: the RBAC rules bound to the
// user there and cluster-wide, for people, not the decision (a node's
// rules depend on its pods, so its list is incomplete).
func (s *Server) answerRulesReview(ctx context.Context, u User, o *api.SelfSubjectRulesReview) error {
	ns := o.Spec.Namespace
	if ns == "" {
		return api.NewBadRequest("no namespace on request")
	}
	var st api.SubjectRulesReviewStatus
	var rules []api.PolicyRule
	var evalErrs []string
	if u.InGroup(pki.MastersGroup) {
		rules = authz.FullAuthority // the privileged group authorizer
	}
	if node, ok := nodeOf(u); ok {
		rules = append(rules, nodeListedRules(node, ns)...)
		st.Incomplete = true
		evalErrs = append(evalErrs, "node authorizer does not support user rule resolution")
	}
	ix, err := s.rbac.index(ctx)
	if err != nil {
		return api.NewInternal(err)
	}
	more, errs := ix.RulesFor(authz.User{Name: u.Name, Groups: u.Groups}, ns)
	rules = append(rules, more...)
	for _, e := range errs {
		st.Incomplete = true
		evalErrs = append(evalErrs, e.Error())
	}
	st.ResourceRules, st.NonResourceRules = []api.ResourceRule{}, []api.NonResourceRule{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, api.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		} else {
			st.ResourceRules = append(st.ResourceRules, api.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
	}
	if len(evalErrs) > 0 {
		st.EvaluationError = strings.Join(evalErrs, ", ")
	}
	o.Status = st
	return nil
}

// nodeListedRules are what the Node authorizer lets node do in ns, as far
// as rules can say it (per object rules are not listed).
func nodeListedRules(node, ns string) []api.PolicyRule {
	read := []string{"get", "list", "watch"}
	rules := []api.PolicyRule{
		{Verbs: read, APIGroups: []string{""}, Resources: []string{"nodes", "services", "endpoints"}},
		{Verbs: read, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		{Verbs: []string{"update", "patch", "delete"}, APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, ResourceNames: []string{node}},
		{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
		{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	}
	if ns == NodeLeaseNamespace {
		rules = append(rules,
			api.PolicyRule{Verbs: []string{"get", "update", "patch", "delete"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{node}},
			api.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}})
	}
	return rules
}
