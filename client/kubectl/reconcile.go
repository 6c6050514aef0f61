package kubectl

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// ReconcileOptions are `kubectl auth reconcile`'s flags.
type ReconcileOptions struct {
	// RemoveExtraPermissions makes a role's rules exactly the file's.
	RemoveExtraPermissions bool
	// RemoveExtraSubjects makes a binding's subjects exactly the file's.
	RemoveExtraSubjects bool
}

// Reconcile creates an RBAC object (Role, ClusterRole, RoleBinding,
// ClusterRoleBinding) or merges it into the stored one, as `kubectl auth
// reconcile`: missing rules, aggregation selectors, subjects, labels and
// annotations are added (api.ReconcileClusterRole and friends), extra ones
// stay unless the options say otherwise; a binding's roleRef cannot change.
// It returns what it did: "create", "update" or "" (nothing to do).
func Reconcile(ctx context.Context, cl client.Interface, want api.Object, o ReconcileOptions) (string, error) {
	k, err := api.KindOf(want)
	if err != nil {
		return "", err
	}
	m := want.GetObjectMeta()
	cur, err := cl.Get(ctx, k, m.Namespace, m.Name)
	if api.IsNotFound(err) {
		_, err = cl.Create(ctx, want)
		return "create", err
	}
	if err != nil {
		return "", err
	}
	next := api.Clone(cur)
	var changed bool
	refErr := func(n, w api.RoleRef) error {
		if n != w {
			return fmt.Errorf("%s %q: cannot change roleRef (delete the binding and reconcile again)", k.GroupResource(), m.Name)
		}
		return nil
	}
	switch n := next.(type) {
	case *api.ClusterRole:
		changed = api.ReconcileClusterRole(n, want.(*api.ClusterRole), o.RemoveExtraPermissions)
	case *api.Role:
		changed = api.ReconcileMeta(&n.ObjectMeta, &want.(*api.Role).ObjectMeta)
		if rules, ch := api.ReconcileRules(n.Rules, want.(*api.Role).Rules, o.RemoveExtraPermissions); ch {
			n.Rules, changed = rules, true
		}
	case *api.RoleBinding:
		w := want.(*api.RoleBinding)
		if err := refErr(n.RoleRef, w.RoleRef); err != nil {
			return "", err
		}
		changed = api.ReconcileMeta(&n.ObjectMeta, &w.ObjectMeta)
		if s, ch := api.ReconcileSubjects(n.Subjects, w.Subjects, o.RemoveExtraSubjects); ch {
			n.Subjects, changed = s, true
		}
	case *api.ClusterRoleBinding:
		w := want.(*api.ClusterRoleBinding)
		if err := refErr(n.RoleRef, w.RoleRef); err != nil {
			return "", err
		}
		changed = api.ReconcileMeta(&n.ObjectMeta, &w.ObjectMeta)
		if s, ch := api.ReconcileSubjects(n.Subjects, w.Subjects, o.RemoveExtraSubjects); ch {
			n.Subjects, changed = s, true
		}
	default:
		return "", fmt.Errorf("%s is no RBAC object", k.Kind)
	}
	if !changed {
		return "", nil
	}
	_, err = cl.Update(ctx, next)
	return "update", err
}
