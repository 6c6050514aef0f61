package controllers

import (
	"context"
	"fmt"
	"log/slog"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver/authz"
)

// The clusterrole-aggregation controller keeps every aggregated
// ClusterRole's rules the union of those of the ClusterRoles its
// aggregationRule selects (by label: rbac.authorization.k8s.io/aggregate-to-view
// puts a role's rules into view, and view's into edit, and edit's into
// admin), as kube-controller-manager's. Any ClusterRole's change may
// change any aggregated one, so each change enqueues every aggregated
// role; Reconcile recomputes one from the cache and writes its rules when
// they differ (in name order, each rule once: authz.AggregatedRules).
type ClusterRoleAggregationController struct {
	client client.Interface
	roles  Lister // *api.ClusterRole
	log    *slog.Logger
}

const clusterRoleAggregationControllerName = "clusterrole-aggregation-controller"

func clusterRoleKind() *api.Kind { return api.MustKindOf(&api.ClusterRole{}) }

// NewClusterRoleAggregationController returns the controller over a cache
// of ClusterRoles.
func NewClusterRoleAggregationController(c client.Interface, roles Lister, log *slog.Logger) *ClusterRoleAggregationController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ClusterRoleAggregationController{client: c, roles: roles, log: log.With("controller", clusterRoleAggregationControllerName)}
}

// Keys are the names of the aggregated ClusterRoles.
func (a *ClusterRoleAggregationController) Keys() []string {
	var keys []string
	for _, o := range a.roles.ListBy(nil, "") {
		if cr := o.(*api.ClusterRole); cr.AggregationRule != nil {
			keys = append(keys, cr.Name)
		}
	}
	return keys
}

// Handler enqueues every aggregated ClusterRole when any ClusterRole changes.
func (a *ClusterRoleAggregationController) Handler(enqueue func(key string)) client.Handler {
	all := func(api.Object) {
		for _, k := range a.Keys() {
			enqueue(k)
		}
	}
	return client.Handler{OnAdd: all, OnUpdate: func(_, o api.Object) { all(o) }, OnDelete: all}
}

// Reconcile implements client.Reconciler for a ClusterRole's name.
func (a *ClusterRoleAggregationController) Reconcile(ctx context.Context, key string) error {
	cr, ok := getAs[*api.ClusterRole](a.roles, "", key)
	if !ok || cr.AggregationRule == nil {
		return nil
	}
	objs := a.roles.ListBy(nil, "")
	all := make([]*api.ClusterRole, len(objs))
	for i, o := range objs {
		all[i] = o.(*api.ClusterRole)
	}
	rules, _, err := authz.AggregatedRules(cr, all)
	if err != nil {
		return err
	}
	if authz.SameRules(rules, cr.Rules) {
		logReconcile(a.log, false, key, fmt.Sprintf("%d rules", len(cr.Rules)), "same", "none")
		return nil
	}
	next := api.Clone(cr)
	next.Rules = rules
	if _, err := a.client.Update(ctx, next); err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return nil // changed or gone meanwhile: its change enqueues it again
		}
		return fmt.Errorf("clusterrole %s: update aggregated rules: %w", key, err)
	}
	logReconcile(a.log, true, key, fmt.Sprintf("%d rules", len(cr.Rules)), fmt.Sprintf("%d rules", len(rules)), "updated the aggregated rules")
	return nil
}
