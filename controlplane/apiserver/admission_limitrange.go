package apiserver

import (
	"context"
	"errors"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/quota"
)

// LimitRanger admission, as Kubernetes' (plugin/pkg/admission/limitranger),
// on pod and claim creates in a namespace with LimitRanges:
//
//   - mutating, before validation: containers without a request or a limit
//     get the Container items' defaultRequest and default, and the pod the
//     annotation kubernetes.io/limit-ranger saying what was set;
//   - validating, after validation and before quota (which so counts the
//     defaults): every item's min, max and maxLimitRequestRatio, per
//     Container, per Pod (the sum) and per PersistentVolumeClaim (storage),
//     refused with all violations at once, 403: `pods "web" is forbidden:
//     maximum cpu usage per Container is 800m, but limit is 1`.
//
// Pod updates are not checked (a pod's containers cannot change), nor
// workloads' templates: the pods they make are.
var limitRangeKind = api.MustKindOf(&api.LimitRange{})

// limitRanges lists the LimitRanges of namespace.
func (r *Registry) limitRanges(ctx context.Context, namespace string) ([]*api.LimitRange, error) {
	items, _, err := r.listShared(ctx, limitRangeKind, namespace)
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("limit ranges of namespace %s: %w", namespace, err))
	}
	out := make([]*api.LimitRange, len(items))
	for i, o := range items {
		out[i] = o.(*api.LimitRange)
	}
	return out, nil
}

// defaultLimits is the mutating step on a new pod; it returns the ranges
// for validateLimits.
func (r *Registry) defaultLimits(ctx context.Context, obj api.Object) ([]*api.LimitRange, error) {
	switch obj.(type) {
	case *api.Pod, *api.PersistentVolumeClaim:
	default:
		return nil, nil
	}
	ranges, err := r.limitRanges(ctx, obj.GetObjectMeta().Namespace)
	if err != nil || len(ranges) == 0 {
		return nil, err
	}
	if p, ok := obj.(*api.Pod); ok {
		quota.ApplyDefaults(p, ranges)
	}
	return ranges, nil
}

// validateLimits is the validating step on a new pod or claim.
func validateLimits(k *api.Kind, obj api.Object, ranges []*api.LimitRange) error {
	if len(ranges) == 0 {
		return nil
	}
	var err error
	switch o := obj.(type) {
	case *api.Pod:
		err = quota.ValidatePod(o, ranges)
	case *api.PersistentVolumeClaim:
		err = quota.ValidateClaim(o, ranges)
	}
	if errors.Is(err, quota.ErrForbidden) {
		return forbidden(k, obj.GetObjectMeta().Name, err.Error())
	}
	return err
}
