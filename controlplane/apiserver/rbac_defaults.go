package apiserver

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver/authz"
)

// ensureRBACDefaults creates the default ClusterRoles and
// ClusterRoleBindings (authz/bootstrap.go) and reconciles the existing
// ones with them, as kube-apiserver's rbac/bootstrap-roles post-start
// hook: what is missing is added, nothing is removed, and one annotated
// rbac.authorization.kubernetes.io/autoupdate: "false" is left alone. Then
// it fills in the aggregated ClusterRoles (admin, edit, view, Kueue's), so
// the defaults work before the aggregation controller first runs.
func (r *Registry) ensureRBACDefaults(ctx context.Context) error {
	for _, want := range authz.DefaultClusterRoles() {
		err := r.retryUpdate(ctx, clusterRoleKind, want, func(cur api.Object) bool {
			c := cur.(*api.ClusterRole)
			return !api.Protected(&c.ObjectMeta) && api.ReconcileClusterRole(c, want, false)
		})
		if err != nil {
			return fmt.Errorf("default clusterrole %q: %w", want.Name, err)
		}
	}
	for _, want := range authz.DefaultClusterRoleBindings() {
		err := r.retryUpdate(ctx, clusterRoleBindingKind, want, func(cur api.Object) bool {
			b := cur.(*api.ClusterRoleBinding)
			if api.Protected(&b.ObjectMeta) {
				return false
			}
			changed := api.ReconcileMeta(&b.ObjectMeta, &want.ObjectMeta)
			subjects, ch := api.ReconcileSubjects(b.Subjects, want.Subjects, false)
			b.Subjects = subjects
			return changed || ch
		})
		if err != nil {
			return fmt.Errorf("default clusterrolebinding %q: %w", want.Name, err)
		}
	}
	return r.AggregateClusterRoles(ctx)
}

// retryUpdate creates want, or changes the stored object with change
// (which reports whether it changed anything) and writes it back, again on
// a conflict.
func (r *Registry) retryUpdate(ctx context.Context, k *api.Kind, want api.Object, change func(cur api.Object) bool) error {
	m := want.GetObjectMeta()
	for range conflictRetries {
		cur, err := r.Get(ctx, k, m.Namespace, m.Name)
		if api.IsNotFound(err) {
			if _, err = r.Create(ctx, k, want); api.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		cur = api.Clone(cur)
		if !change(cur) {
			return nil
		}
		if _, err = r.Update(ctx, k, cur); api.IsConflict(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("%s %q: still conflicting after %d tries", k.Kind, m.Name, conflictRetries)
}

// AggregateClusterRoles sets the rules of every aggregated ClusterRole to
// the union of those of the ClusterRoles it selects (authz.AggregatedRules),
// until nothing changes (edit is in admin, view in edit). The
// clusterrole-aggregation controller calls it whenever a ClusterRole
// changes.
func (r *Registry) AggregateClusterRoles(ctx context.Context) error {
	for range 4 { // view → edit → admin, and one round to see it settled
		objs, _, err := r.List(ctx, clusterRoleKind, "", api.ListOptions{})
		if err != nil {
			return err
		}
		all := make([]*api.ClusterRole, len(objs))
		for i, o := range objs {
			all[i] = o.(*api.ClusterRole)
		}
		changed := false
		for _, cr := range all {
			rules, ok, err := authz.AggregatedRules(cr, all)
			if err != nil || !ok || authz.SameRules(rules, cr.Rules) {
				continue
			}
			next := api.Clone(cr)
			next.Rules = rules
			if _, err := r.Update(ctx, clusterRoleKind, next); err != nil && !api.IsConflict(err) && !api.IsNotFound(err) {
				return fmt.Errorf("aggregate clusterrole %q: %w", cr.Name, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return nil
}
