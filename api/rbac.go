package api

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// RBAC, rbac.authorization.k8s.io/v1: who may do what, as objects.
// A Role (in one namespace) or ClusterRole (everywhere, or granted in one
// namespace by a RoleBinding) lists rules; a RoleBinding or
// ClusterRoleBinding grants a role's rules to subjects (users, groups,
// service accounts). Nothing is denied by a rule: a request is allowed
// when some rule of some role bound to its user allows it
// (controlplane/apiserver/authz evaluates them).

// RBACGroup is the API group of the RBAC kinds.
const RBACGroup = "rbac.authorization.k8s.io"

// Subject kinds.
const (
	SubjectUser           = "User"
	SubjectGroup          = "Group"
	SubjectServiceAccount = "ServiceAccount"
)

// Well-known labels and annotations of RBAC objects.
const (
	// AnnotationRBACAutoUpdate "true" on a default role or binding lets the
	// server reconcile it at start (add missing rules and subjects);
	// "false" leaves it alone.
	AnnotationRBACAutoUpdate = "rbac.authorization.kubernetes.io/autoupdate"
	// LabelBootstrapping marks the default roles: "rbac-defaults".
	LabelBootstrapping = "kubernetes.io/bootstrapping"
	// LabelAggregateTo* put a ClusterRole's rules into admin, edit, view.
	LabelAggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	LabelAggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	LabelAggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// Wildcards of PolicyRule.
const (
	VerbAll     = "*"
	APIGroupAll = "*"
	ResourceAll = "*"
	URLAll      = "*"
)

// PolicyRule says which verbs are allowed on which resources (or
// non-resource URLs). A subresource is "RESOURCE/SUB" ("pods/log",
// "*/scale").
type PolicyRule struct {
	// Verbs: get, list, watch, create, update, patch, delete,
	// deletecollection, or special ones (bind, escalate, impersonate,
	// approve, use); "*" is every verb.
	Verbs []string `json:"verbs"`
	// APIGroups of the resources ("" is the core group, "*" every group).
	APIGroups []string `json:"apiGroups,omitempty"`
	// Resources the rule applies to ("*" every resource).
	Resources []string `json:"resources,omitempty"`
	// ResourceNames restricts the rule to these objects (not list,
	// watch or create: their requests name none).
	ResourceNames []string `json:"resourceNames,omitempty"`
	// NonResourceURLs are paths (a trailing "*" is a prefix): only in a
	// ClusterRole bound by a ClusterRoleBinding.
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// Subject is who a binding grants to.
type Subject struct {
	// Kind: User, Group or ServiceAccount.
	Kind string `json:"kind"`
	// APIGroup: "rbac.authorization.k8s.io" for User and Group, "" for
	// ServiceAccount.
	APIGroup string `json:"apiGroup,omitempty"`
	// Name of the user, group or service account.
	Name string `json:"name"`
	// Namespace of a ServiceAccount (in a RoleBinding it defaults to the
	// binding's).
	Namespace string `json:"namespace,omitempty"`
}

// RoleRef names the role a binding grants; it cannot change.
type RoleRef struct {
	// APIGroup: rbac.authorization.k8s.io.
	APIGroup string `json:"apiGroup"`
	// Kind: Role (a RoleBinding only) or ClusterRole.
	Kind string `json:"kind"`
	// Name of the role.
	Name string `json:"name"`
}

// AggregationRule builds a ClusterRole's rules from other ClusterRoles:
// those matched by any selector (the clusterrole-aggregation controller
// keeps the rules up to date).
type AggregationRule struct {
	ClusterRoleSelectors []LabelSelector `json:"clusterRoleSelectors,omitempty"`
}

// Role is a set of rules in one namespace.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Role struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Rules of the role.
	Rules []PolicyRule `json:"rules"`
}

// ClusterRole is a set of rules for the whole cluster (or, bound by a
// RoleBinding, for one namespace).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ClusterRole struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Rules of the role; with AggregationRule the controller owns them.
	Rules []PolicyRule `json:"rules"`
	// AggregationRule, when set, makes Rules the union of the rules of the
	// ClusterRoles it selects.
	AggregationRule *AggregationRule `json:"aggregationRule,omitempty"`
}

// RoleBinding grants a Role, or a ClusterRole's rules, in its namespace.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type RoleBinding struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Subjects granted the role.
	Subjects []Subject `json:"subjects,omitempty"`
	// RoleRef is the role granted.
	RoleRef RoleRef `json:"roleRef"`
}

// ClusterRoleBinding grants a ClusterRole everywhere.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ClusterRoleBinding struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Subjects granted the role.
	Subjects []Subject `json:"subjects,omitempty"`
	// RoleRef is the ClusterRole granted.
	RoleRef RoleRef `json:"roleRef"`
}

// validateRBACName is Kubernetes' ValidateRBACName: any path segment.
func validateRBACName(name string) []string { return content.IsPathSegmentName(name) }

// validatePolicyRules follows pkg/apis/rbac/validation.ValidatePolicyRule.
func validatePolicyRules(rules []PolicyRule, namespaced bool, base string) FieldErrors {
	var errs FieldErrors
	for i, r := range rules {
		p := elemPath(base, "", i)
		if len(r.Verbs) == 0 {
			errs = append(errs, Required(p+".verbs", "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, Invalid(p+".nonResourceURLs", r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 {
				errs = append(errs, Invalid(p+".nonResourceURLs", r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, Required(p+".apiGroups", "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, Required(p+".resources", "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateRole(r *Role) FieldErrors {
	errs := validateMeta(&r.ObjectMeta, true, validateRBACName)
	return append(errs, validatePolicyRules(r.Rules, true, "rules")...)
}

func validateClusterRole(r *ClusterRole) FieldErrors {
	errs := validateMeta(&r.ObjectMeta, false, validateRBACName)
	errs = append(errs, validatePolicyRules(r.Rules, false, "rules")...)
	if ar := r.AggregationRule; ar != nil {
		if len(ar.ClusterRoleSelectors) == 0 {
			errs = append(errs, Required("aggregationRule.clusterRoleSelectors", "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range ar.ClusterRoleSelectors {
			errs = append(errs, validateLabelSelector(&ar.ClusterRoleSelectors[i], fmt.Sprintf("aggregationRule.clusterRoleSelectors[%d]", i))...)
		}
	}
	return errs
}

// validateBinding follows ValidateRoleBinding and ValidateClusterRoleBinding.
func validateBinding(m *ObjectMeta, namespaced bool, ref RoleRef, subjects []Subject) FieldErrors {
	errs := validateMeta(m, namespaced, validateRBACName)
	if ref.APIGroup != RBACGroup {
		errs = append(errs, NotSupported("roleRef.apiGroup", ref.APIGroup, RBACGroup))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, NotSupported("roleRef.kind", ref.Kind, kinds...))
	}
	if ref.Name == "" {
		errs = append(errs, Required("roleRef.name", ""))
	} else {
		for _, msg := range validateRBACName(ref.Name) {
			errs = append(errs, Invalid("roleRef.name", ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, fmt.Sprintf("subjects[%d]", i))...)
	}
	return errs
}

// validateSubject follows ValidateRoleBindingSubject.
func validateSubject(s Subject, namespaced bool, p string) FieldErrors {
	var errs FieldErrors
	if s.Name == "" {
		errs = append(errs, Required(p+".name", ""))
	}
	switch s.Kind {
	case SubjectServiceAccount:
		if s.Name != "" {
			for _, msg := range isDNS1123Subdomain(s.Name) {
				errs = append(errs, Invalid(p+".name", s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, NotSupported(p+".apiGroup", s.APIGroup, ""))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, Required(p+".namespace", ""))
		}
	case SubjectUser, SubjectGroup:
		if s.APIGroup != RBACGroup {
			errs = append(errs, NotSupported(p+".apiGroup", s.APIGroup, RBACGroup))
		}
	default:
		errs = append(errs, NotSupported(p+".kind", s.Kind, SubjectServiceAccount, SubjectUser, SubjectGroup))
	}
	return errs
}

// validateBindingUpdate: a binding's roleRef cannot change (delete it and
// make a new one), as Kubernetes says.
func validateBindingUpdate(n, o RoleRef) FieldErrors {
	if n != o {
		return FieldErrors{Invalid("roleRef", n, "cannot change roleRef")}
	}
	return nil
}

// defaultSubjects is SetDefaults_Subject: User and Group subjects get the
// RBAC API group, ServiceAccount ones none.
func defaultSubjects(ss []Subject) {
	for i := range ss {
		if ss[i].APIGroup == "" && (ss[i].Kind == SubjectUser || ss[i].Kind == SubjectGroup) {
			ss[i].APIGroup = RBACGroup
		}
	}
}

// Verbs `kubectl create role` accepts besides the resource verbs.
var roleVerbs = []string{"*", "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
	"use", "bind", "escalate", "impersonate", "approve", "sign", "proxy"}

// RulesFromFlags builds the rules of `kubectl create role|clusterrole
// NAME --verb V... --resource R... --resource-name N...`, as kubectl does:
// one rule per API group of the resources (a resource is NAME,
// NAME.GROUP or NAME/SUBRESOURCE, resolved against the served kinds;
// "*" is every resource of every group), each with every verb and name.
func RulesFromFlags(verbs, resources, names []string) ([]PolicyRule, error) {
	if len(verbs) == 0 {
		return nil, fmt.Errorf("at least one verb must be specified")
	}
	for _, v := range verbs {
		if !slices.Contains(roleVerbs, v) {
			return nil, fmt.Errorf("invalid verb: '%s'", v)
		}
	}
	if len(resources) == 0 {
		return nil, fmt.Errorf("at least one resource must be specified")
	}
	var groups []string
	byGroup := map[string][]string{}
	for _, r := range resources {
		base, sub, _ := strings.Cut(r, "/")
		group, resource := "", base
		if base == "*" {
			group = "*"
		} else {
			k, err := LookupResource(base)
			if err != nil {
				return nil, fmt.Errorf("resource %q: %w", r, err)
			}
			group, resource = k.Group, k.Resource
		}
		if sub != "" {
			resource += "/" + sub
		}
		if !slices.Contains(groups, group) {
			groups = append(groups, group)
		}
		if !slices.Contains(byGroup[group], resource) {
			byGroup[group] = append(byGroup[group], resource)
		}
	}
	var rules []PolicyRule
	for _, g := range groups {
		rules = append(rules, PolicyRule{Verbs: slices.Clone(verbs), APIGroups: []string{g}, Resources: byGroup[g], ResourceNames: slices.Clone(names)})
	}
	return rules, nil
}

// SubjectsFromFlags builds the subjects of `kubectl create rolebinding
// --user U --group G --serviceaccount NS:NAME`.
func SubjectsFromFlags(users, groups, serviceAccounts []string) ([]Subject, error) {
	var out []Subject
	for _, u := range users {
		out = append(out, Subject{Kind: SubjectUser, APIGroup: RBACGroup, Name: u})
	}
	for _, g := range groups {
		out = append(out, Subject{Kind: SubjectGroup, APIGroup: RBACGroup, Name: g})
	}
	for _, sa := range serviceAccounts {
		ns, name, ok := strings.Cut(sa, ":")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("serviceaccount must be <namespace>:<name>")
		}
		out = append(out, Subject{Kind: SubjectServiceAccount, Namespace: ns, Name: name})
	}
	return out, nil
}
