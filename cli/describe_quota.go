package cli

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// describe quota, limitrange and namespace, as kubectl's describers
// (describeQuota, describeLimitRange, describeNamespace): no events.

// quotaScopeHelp is kubectl's helpTextForResourceQuotaScope.
var quotaScopeHelp = map[string]string{
	api.ResourceQuotaScopeTerminating:    "Matches all pods that have an active deadline. These pods have a limited lifespan on a node before being actively terminated by the system.",
	api.ResourceQuotaScopeNotTerminating: "Matches all pods that do not have an active deadline. These pods usually include long running pods whose container command is not expected to terminate.",
	api.ResourceQuotaScopeBestEffort:     "Matches all pods that do not have resource requirements set. These pods have a best effort quality of service.",
	api.ResourceQuotaScopeNotBestEffort:  "Matches all pods that have at least one resource requirement set. These pods have a burstable or guaranteed quality of service.",
}

func describeQuota(w *describeWriter, q *api.ResourceQuota) {
	w.line(0, "Name:\t%s\n", q.Name)
	w.line(0, "Namespace:\t%s\n", q.Namespace)
	quotaScopes(w, 0, " * ", q)
	w.line(0, "Resource\tUsed\tHard\n")
	w.line(0, "--------\t----\t----\n")
	for _, name := range sortedKeys(q.Status.Hard) {
		hard, used := q.Status.Hard[name], q.Status.Used[name]
		if hard.Format != used.Format {
			used = *resource.NewQuantity(used.Value(), hard.Format)
		}
		w.line(0, "%s\t%s\t%s\n", name, used.String(), hard.String())
	}
}

// quotaScopes writes a quota's "Scopes:" line and their help.
func quotaScopes(w *describeWriter, level int, bullet string, q *api.ResourceQuota) {
	if len(q.Spec.Scopes) == 0 {
		return
	}
	scopes := slices.Sorted(slices.Values(q.Spec.Scopes))
	w.line(level, "Scopes:\t%s\n", strings.Join(scopes, ", "))
	for _, s := range scopes {
		if help := quotaScopeHelp[s]; help != "" {
			w.line(level, "%s%s\n", bullet, help)
		}
	}
}

func describeLimitRange(w *describeWriter, lr *api.LimitRange) {
	w.line(0, "Name:\t%s\n", lr.Name)
	w.line(0, "Namespace:\t%s\n", lr.Namespace)
	w.line(0, "Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
	w.line(0, "----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
	limitRangeRows(w, "", lr)
}

// limitRangeRows is kubectl's describeLimitRangeSpec: a row per item and
// resource, "-" for what is not set.
func limitRangeRows(w *describeWriter, prefix string, lr *api.LimitRange) {
	for _, it := range lr.Spec.Limits {
		names := map[string]bool{}
		for _, l := range []api.ResourceList{it.Max, it.Min, it.Default, it.DefaultRequest, it.MaxLimitRequestRatio} {
			for k := range l {
				names[k] = true
			}
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range names {
				if !yield(k) {
					return
				}
			}
		}) {
			cell := func(l api.ResourceList) string {
				if q, ok := l[k]; ok {
					return q.String()
				}
				return "-"
			}
			w.line(0, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\n", prefix, it.Type, k, cell(it.Min), cell(it.Max), cell(it.DefaultRequest), cell(it.Default), cell(it.MaxLimitRequestRatio))
		}
	}
}

// describeNamespaceLimits writes a namespace's quotas and limit ranges
// after its status, as kubectl describe namespace.
func describeNamespaceLimits(ctx context.Context, w *describeWriter, cl client.Interface, ns string) error {
	quotas, _, err := client.List[*api.ResourceQuota](ctx, cl, ns, api.ListOptions{})
	if err != nil {
		return err
	}
	ranges, _, err := client.List[*api.LimitRange](ctx, cl, ns, api.ListOptions{})
	if err != nil {
		return err
	}
	w.line(0, "\n")
	if len(quotas) == 0 {
		w.line(0, "No resource quota.\n")
	} else {
		w.line(0, "Resource Quotas\n")
		for _, q := range quotas {
			w.line(1, "Name:\t%s\n", q.Name)
			quotaScopes(w, 1, "* ", q)
			w.line(1, "Resource\tUsed\tHard\n")
			w.line(1, "--------\t---\t---\n")
			for _, name := range sortedKeys(q.Status.Hard) {
				hard, used := q.Status.Hard[name], q.Status.Used[name]
				w.line(1, "%s\t%s\t%s\n", name, used.String(), hard.String())
			}
		}
	}
	w.line(0, "\n")
	if len(ranges) == 0 {
		w.line(0, "No LimitRange resource.\n")
		return nil
	}
	w.line(0, "Resource Limits\n Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
	w.line(0, " ----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
	for _, lr := range ranges {
		limitRangeRows(w, " ", lr)
	}
	return nil
}
