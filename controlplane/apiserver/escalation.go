package apiserver

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver/authz"
	"skiff.dev/skiff/pki"
)

// # Escalation prevention
//
// RBAC would be worthless if anyone allowed to write roles could write
// themselves a bigger one. As in Kubernetes (pkg/registry/rbac/*/policybased),
// a create or update of:
//
//   - a Role or ClusterRole needs the escalate verb on it, or every
//     permission its rules grant, held where it applies (its namespace,
//     or the cluster); an aggregationRule needs cluster-admin's powers (it
//     can gather anything);
//   - a RoleBinding or ClusterRoleBinding needs the bind verb on the role
//     it names (resourceNames: the role's name), or every permission of
//     that role, held in the binding's namespace (or the cluster).
//
// system:masters may do anything; in-process writes (no user: the
// server's own defaults, the aggregation controller) are not checked.
// The refusal is Kubernetes' word for word:
//
//	roles.rbac.authorization.k8s.io "admin" is forbidden: user "alice" (groups=["students" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//	{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}

// setAuthorizer lets the registry ask s (escalation checks, Local's reads
// as a user).
func (r *Registry) setAuthorizer(s *Server) { r.authorizer.Store(s) }

// admitRBAC checks a write of an RBAC object by the request's user.
func (r *Registry) admitRBAC(ctx context.Context, k *api.Kind, obj api.Object) error {
	if k != roleKind && k != clusterRoleKind && k != roleBindingKind && k != clusterRoleBindingKind {
		return nil
	}
	u, ok := UserFrom(ctx)
	s := r.authorizer.Load()
	if !ok || s == nil || u.InGroup(pki.MastersGroup) {
		return nil
	}
	m := obj.GetObjectMeta()
	ns := m.Namespace
	ix, err := s.rbac.index(ctx)
	if err != nil {
		return api.NewInternal(err)
	}
	au := authz.User{Name: u.Name, Groups: u.Groups}
	confirm := func(rules []api.PolicyRule) error {
		owner, resErrs := ix.RulesFor(au, ns)
		if err := authz.ConfirmNoEscalation(au, owner, resErrs, rules); err != nil {
			return forbidden(k, m.Name, err.Error())
		}
		return nil
	}
	may := func(verb, resource, name string) (bool, error) {
		ok, _, err := s.authorize(ctx, attributes{user: u, verb: verb, resourceRequest: true, group: api.RBACGroup,
			resource: resource, namespace: ns, name: name})
		return ok, err
	}
	switch o := obj.(type) {
	case *api.Role:
		if ok, err := may("escalate", "roles", o.Name); err != nil || ok {
			return err
		}
		return confirm(o.Rules)
	case *api.ClusterRole:
		if ok, err := may("escalate", "clusterroles", o.Name); err != nil || ok {
			return err
		}
		if err := confirm(o.Rules); err != nil {
			return err
		}
		if o.AggregationRule != nil {
			owner, resErrs := ix.RulesFor(au, "")
			if authz.ConfirmNoEscalation(au, owner, resErrs, authz.FullAuthority) != nil {
				return forbidden(k, m.Name, "must have cluster-admin privileges to use the aggregationRule")
			}
		}
		return nil
	case *api.RoleBinding:
		return r.admitBinding(ix, o.RoleRef, ns, may, confirm, k, m.Name)
	case *api.ClusterRoleBinding:
		return r.admitBinding(ix, o.RoleRef, "", may, confirm, k, m.Name)
	}
	return nil
}

// admitBinding: bind on the role named, or hold its rules.
func (r *Registry) admitBinding(ix *authz.Index, ref api.RoleRef, ns string, may func(verb, resource, name string) (bool, error),
	confirm func([]api.PolicyRule) error, k *api.Kind, name string) error {
	resource := "clusterroles"
	if ref.Kind == "Role" {
		resource = "roles"
	}
	if ok, err := may("bind", resource, ref.Name); err != nil || ok {
		return err
	}
	rules, err := ix.RoleRefRules(ref, ns)
	if err != nil {
		return forbidden(k, name, err.Error())
	}
	return confirm(rules)
}
