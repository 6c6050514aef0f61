// Package authz is RBAC, the authorizer kube-apiserver runs with
// --authorization-mode=RBAC: who may do what, decided from Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings (rbac.authorization.k8s.io/v1).
//
// # Evaluation
//
// A request (Attributes: the user and groups, the verb, the API group,
// resource, subresource, namespace and name, or a non-resource path) is
// allowed when one rule of one role bound to the user, to one of its
// groups or (for a service account's user) to the service account allows
// it. Nothing denies: RBAC only ever says "allowed" or "no opinion", so a
// request no rule allows is refused by the API server. A ClusterRoleBinding
// grants its ClusterRole everywhere; a RoleBinding grants a Role, or a
// ClusterRole's rules, in its own namespace only. A rule matches as
// Kubernetes' RuleAllows: verbs, apiGroups and resources ("*" each), a
// subresource as "pods/log" or "*/scale", resourceNames when set,
// nonResourceURLs with a trailing "*" as a prefix.
//
// # Speed
//
// Every request of every user who is not system:masters is evaluated, so
// RBAC is kept as an index (Index), rebuilt whenever a role or binding
// changes and swapped in atomically: a request reads one immutable
// snapshot, looks up the grants of its user name and each of its groups
// (a map lookup each) cluster-wide and in its namespace, and walks only
// their rules. No store read, no lock on the request path.
//
// # Invariants
//
//   - A snapshot is never modified after it is published; Authorize and
//     RulesFor are safe for concurrent use with Update.
//   - A binding to a role that does not exist grants nothing; its error is
//     the reason of a refusal (`RBAC: role.rbac.authorization.k8s.io "x"
//     not found`), as in Kubernetes.
//   - Escalation prevention (no one grants what they lack) is the API
//     server's admission (escalation.go), from the same rules.
//
// The default roles and bindings, Kubernetes' bootstrap policy with the
// roles skiff's own components and Kueue's users need, are in
// bootstrap.go.
package authz
