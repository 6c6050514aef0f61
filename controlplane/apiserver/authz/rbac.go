package authz

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"skiff.dev/skiff/api"
)

// User is who asks: the name and the groups (system:authenticated
// included), as Kubernetes' user.Info.
type User struct {
	Name   string
	Groups []string
}

// Attributes are what a request asks, as Kubernetes' authorizer.Attributes.
type Attributes struct {
	User User
	// Verb: get list watch create update patch delete deletecollection
	// (or bind, escalate, impersonate, approve, ...) for a resource
	// request; the lowercased HTTP method for a path.
	Verb string
	// ResourceRequest: an API resource (the fields below); otherwise Path.
	ResourceRequest bool
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
}

// ServiceAccountUserPrefix + "NS:NAME" is a service account's user name.
const ServiceAccountUserPrefix = "system:serviceaccount:"

// grant is one binding's grant of one role's rules.
type grant struct {
	// rules of the role bound (nil when it does not exist: missing says so).
	rules   []api.PolicyRule
	missing error
	// binding, role and subject describe the grant in an allow's reason.
	binding, role string
}

// Index is one immutable snapshot of the RBAC objects, indexed by
// subject. Build one with NewIndex; RBAC holds the current one.
type Index struct {
	clusterRoles map[string][]api.PolicyRule
	roles        map[string]map[string][]api.PolicyRule // namespace → name → rules
	// cluster holds the grants of ClusterRoleBindings, ns those of each
	// namespace's RoleBindings, by subject key (subjectKey).
	cluster map[string][]*grant
	ns      map[string]map[string][]*grant
}

// subjectKey is the index key of a user ("u:NAME", service accounts
// included by their user name) or a group ("g:NAME").
func userKey(name string) string  { return "u:" + name }
func groupKey(name string) string { return "g:" + name }

// NewIndex indexes the given objects (read only; kept, never modified).
func NewIndex(roles []*api.Role, clusterRoles []*api.ClusterRole, bindings []*api.RoleBinding, clusterBindings []*api.ClusterRoleBinding) *Index {
	ix := &Index{clusterRoles: map[string][]api.PolicyRule{}, roles: map[string]map[string][]api.PolicyRule{},
		cluster: map[string][]*grant{}, ns: map[string]map[string][]*grant{}}
	for _, r := range clusterRoles {
		ix.clusterRoles[r.Name] = r.Rules
	}
	for _, r := range roles {
		if ix.roles[r.Namespace] == nil {
			ix.roles[r.Namespace] = map[string][]api.PolicyRule{}
		}
		ix.roles[r.Namespace][r.Name] = r.Rules
	}
	for _, b := range clusterBindings {
		g := ix.grantOf("ClusterRoleBinding", b.Name, b.RoleRef, "")
		for _, s := range b.Subjects {
			if k := subjectKey(s, ""); k != "" {
				ix.cluster[k] = append(ix.cluster[k], g)
			}
		}
	}
	for _, b := range bindings {
		g := ix.grantOf("RoleBinding", b.Name, b.RoleRef, b.Namespace)
		m := ix.ns[b.Namespace]
		if m == nil {
			m = map[string][]*grant{}
			ix.ns[b.Namespace] = m
		}
		for _, s := range b.Subjects {
			if k := subjectKey(s, b.Namespace); k != "" {
				m[k] = append(m[k], g)
			}
		}
	}
	return ix
}

// grantOf resolves a binding's roleRef in namespace ns ("" for a
// ClusterRoleBinding).
func (ix *Index) grantOf(bindingKind, bindingName string, ref api.RoleRef, ns string) *grant {
	g := &grant{binding: fmt.Sprintf("%s %q", bindingKind, bindingName), role: fmt.Sprintf("%s %q", ref.Kind, ref.Name)}
	g.rules, g.missing = ix.RoleRefRules(ref, ns)
	return g
}

// RoleRefRules returns the rules of the role a binding in namespace ns
// refers to, or Kubernetes' not-found error.
func (ix *Index) RoleRefRules(ref api.RoleRef, ns string) ([]api.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		if rules, ok := ix.clusterRoles[ref.Name]; ok {
			return rules, nil
		}
		return nil, fmt.Errorf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)
	case "Role":
		if rules, ok := ix.roles[ns][ref.Name]; ok && ns != "" {
			return rules, nil
		}
		return nil, fmt.Errorf("role.rbac.authorization.k8s.io %q not found", ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// subjectKey is the key of a binding's subject (bindingNS: a RoleBinding's
// namespace, the default of its service account subjects), or "" for a
// subject that can match nobody.
func subjectKey(s api.Subject, bindingNS string) string {
	switch s.Kind {
	case api.SubjectUser:
		return userKey(s.Name)
	case api.SubjectGroup:
		return groupKey(s.Name)
	case api.SubjectServiceAccount:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS
		}
		if ns == "" || s.Name == "" {
			return ""
		}
		return userKey(ServiceAccountUserPrefix + ns + ":" + s.Name)
	}
	return ""
}

// visit calls f with every grant that applies to u in namespace ns ("" for
// cluster-wide grants only), until f returns false. subject says who the
// grant is for: the user (-1) or u.Groups[i] (i).
func (ix *Index) visit(u User, ns string, f func(g *grant, subject int) bool) {
	try := func(key string, subject int) bool {
		for _, g := range ix.cluster[key] {
			if !f(g, subject) {
				return false
			}
		}
		if ns == "" {
			return true
		}
		for _, g := range ix.ns[ns][key] {
			if !f(g, subject) {
				return false
			}
		}
		return true
	}
	if !try(userKey(u.Name), -1) {
		return
	}
	for i, grp := range u.Groups {
		if !try(groupKey(grp), i) {
			return
		}
	}
}

// subjectString names who a grant went to, as Kubernetes' reason does.
func subjectString(u User, subject int) string {
	switch {
	case subject >= 0:
		return fmt.Sprintf("Group %q", u.Groups[subject])
	case strings.HasPrefix(u.Name, ServiceAccountUserPrefix):
		return fmt.Sprintf("ServiceAccount %q", u.Name)
	}
	return fmt.Sprintf("User %q", u.Name)
}

// Authorize decides a as Kubernetes' RBAC authorizer: allowed with the
// reason naming the binding, role and subject that allowed it; or not,
// with the reason naming the bindings whose roles do not exist ("" when
// none).
func (ix *Index) Authorize(a Attributes) (allowed bool, reason string) {
	var missing []error
	ns := a.Namespace
	if !a.ResourceRequest {
		ns = ""
	}
	ix.visit(a.User, ns, func(g *grant, subject int) bool {
		if g.missing != nil {
			missing = append(missing, g.missing)
			return true
		}
		for i := range g.rules {
			if RuleAllows(a, &g.rules[i]) {
				allowed = true
				reason = "RBAC: allowed by " + g.binding + " of " + g.role + " to " + subjectString(a.User, subject)
				return false
			}
		}
		return true
	})
	if allowed {
		return true, reason
	}
	if len(missing) > 0 {
		return false, "RBAC: " + aggregate(missing)
	}
	return false, ""
}

// RulesFor lists every rule granted to u in namespace ns ("" for the
// cluster-wide ones only), and the errors of bindings whose roles do not
// exist (the list is then incomplete).
func (ix *Index) RulesFor(u User, ns string) ([]api.PolicyRule, []error) {
	var rules []api.PolicyRule
	var errs []error
	ix.visit(u, ns, func(g *grant, _ int) bool {
		if g.missing != nil {
			errs = append(errs, g.missing)
		}
		rules = append(rules, g.rules...)
		return true
	})
	return rules, errs
}

// aggregate formats errors as Kubernetes' utilerrors.NewAggregate: one
// alone, several in brackets.
func aggregate(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		if m := e.Error(); !slices.Contains(msgs, m) {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// RBAC holds the current Index. The zero value holds an empty one.
type RBAC struct {
	ix atomic.Pointer[Index]
}

// Update publishes a new index of the given objects.
func (r *RBAC) Update(ix *Index) { r.ix.Store(ix) }

// Index is the current snapshot (an empty one before Update).
func (r *RBAC) Index() *Index {
	if ix := r.ix.Load(); ix != nil {
		return ix
	}
	return emptyIndex
}

var emptyIndex = NewIndex(nil, nil, nil, nil)

// ErrNoUser is the error of an escalation check without a user.
var ErrNoUser = errors.New("no user on the request")
