package quota

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"skiff.dev/skiff/api"
)

// Resource names of the pod evaluator (Kubernetes' podResources).
var podResources = []string{"count/pods", api.ResourceCPU, api.ResourceMemory, "ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage",
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods"}

// podConstrained are the resources a pod's containers must all name when a
// quota caps them (Kubernetes' validationSet).
var podConstrained = []string{api.ResourceCPU, api.ResourceMemory, "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}

var (
	serviceResources = []string{"count/services", "services", "services.nodeports", "services.loadbalancers"}
	claimResources   = []string{"requests.storage", "persistentvolumeclaims"}
)

// legacyCount is the quota name that counts objects of a core resource
// beside count/RESOURCE (Kubernetes' pods, services, ... names).
var legacyCount = map[string]string{"configmaps": "configmaps", "secrets": "secrets", "resourcequotas": "resourcequotas",
	"persistentvolumeclaims": "persistentvolumeclaims", "services": "services", "pods": "pods"}

// one is the quantity 1.
func one() api.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }

// CountName is the object count quota name of kind k: count/pods,
// count/jobs.batch.
func CountName(k *api.Kind) string { return api.ObjectCountPrefix + k.GroupResource() }

// Covers reports whether a quota on resource name counts objects of kind k
// (Kubernetes' MatchingResources of k's evaluator).
func Covers(k *api.Kind, name string) bool {
	if name == CountName(k) {
		return true
	}
	switch k.GroupResource() {
	case "pods":
		return slices.Contains(podResources, name) || strings.HasPrefix(name, "hugepages-") || strings.HasPrefix(name, "requests.hugepages-") ||
			strings.HasPrefix(name, api.ResourceRequestsPrefix) && strings.Contains(name, "/")
	case "services":
		return slices.Contains(serviceResources, name)
	case "persistentvolumeclaims":
		if slices.Contains(claimResources, name) {
			return true
		}
		for _, r := range claimResources {
			if strings.HasSuffix(name, api.StorageClassQuotaInfix+r) {
				return true
			}
		}
		return false
	}
	return legacyCount[k.GroupResource()] == name
}

// Usage is what obj of kind k counts for (Kubernetes' Usage of k's
// evaluator); now decides whether a deleted pod's grace period is over.
func Usage(k *api.Kind, obj api.Object, now time.Time) api.ResourceList {
	out := api.ResourceList{CountName(k): one()}
	if n, ok := legacyCount[k.GroupResource()]; ok {
		out[n] = one()
	}
	switch o := obj.(type) {
	case *api.Pod:
		if !Live(o, now) {
			return api.ResourceList{CountName(k): one()}
		}
		podComputeUsage(out, podRequests(&o.Spec), podLimits(&o.Spec))
	case *api.Service:
		out["services.loadbalancers"] = resource.Quantity{Format: resource.DecimalSI}
		out["services.nodeports"] = resource.Quantity{Format: resource.DecimalSI}
		switch o.Spec.Type {
		case api.ServiceTypeNodePort:
			out["services.nodeports"] = *resource.NewQuantity(int64(len(o.Spec.Ports)), resource.DecimalSI)
		case "LoadBalancer": // refused by validation today; counted as Kubernetes would
			out["services.nodeports"] = *resource.NewQuantity(int64(len(o.Spec.Ports)), resource.DecimalSI)
			out["services.loadbalancers"] = one()
		}
	case *api.PersistentVolumeClaim:
		class := claimClass(o)
		if class != "" {
			out[class+api.StorageClassQuotaInfix+"persistentvolumeclaims"] = one()
		}
		if q, ok := o.Spec.Resources.Requests[api.ResourceStorage]; ok {
			out["requests.storage"] = q.DeepCopy()
			if class != "" {
				out[class+api.StorageClassQuotaInfix+"requests.storage"] = q.DeepCopy()
			}
		}
	}
	return out
}

// claimClass is the storage class a claim is charged to.
func claimClass(c *api.PersistentVolumeClaim) string {
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// UsageCache keeps each object's Usage by resourceVersion, for a counter
// that sums a namespace's objects again and again (the controller, every
// time one of them changes): an object unchanged since the last count is
// not computed again. The usage of a pod being deleted depends on the time
// (Live), so it is always computed. Entries not asked for within a TTL are
// dropped. Safe for concurrent use; the lists it returns are shared: read
// only.
type UsageCache struct {
	mu      sync.Mutex
	entries map[ObjectID]*usageEntry
	swept   time.Time
}

type usageEntry struct {
	rv    string
	usage api.ResourceList
	used  time.Time
}

// Usage is Usage(k, obj, now), from the cache when obj's resourceVersion
// is the one computed before.
func (c *UsageCache) Usage(k *api.Kind, obj api.Object, now time.Time) api.ResourceList {
	m := obj.GetObjectMeta()
	if p, ok := obj.(*api.Pod); (ok && p.DeletionTimestamp != nil) || m.UID == "" || m.ResourceVersion == "" {
		return Usage(k, obj, now)
	}
	key := ObjectID{Resource: k.GroupResource(), UID: m.UID}
	c.mu.Lock()
	e := c.entries[key]
	if e != nil && e.rv == m.ResourceVersion {
		e.used = now
		c.mu.Unlock()
		return e.usage
	}
	c.mu.Unlock()
	u := Usage(k, obj, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[ObjectID]*usageEntry{}
	}
	c.entries[key] = &usageEntry{rv: m.ResourceVersion, usage: u, used: now}
	if now.Sub(c.swept) > ReservationTTL {
		c.swept = now
		for k, e := range c.entries {
			if now.Sub(e.used) > ReservationTTL {
				delete(c.entries, k)
			}
		}
	}
	return u
}

// Live is Kubernetes' QuotaV1Pod: a pod counts until it has ended or its
// deletion grace period has passed.
func Live(p *api.Pod, now time.Time) bool {
	if p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed {
		return false
	}
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil {
		end := p.DeletionTimestamp.Add(time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
		if now.After(end) {
			return false
		}
	}
	return true
}

// podComputeUsage is Kubernetes' podComputeUsageHelper.
func podComputeUsage(out, requests, limits api.ResourceList) {
	out["pods"] = one()
	for _, r := range []string{api.ResourceCPU, api.ResourceMemory, "ephemeral-storage"} {
		if q, ok := requests[r]; ok {
			out[r] = q.DeepCopy()
			out[api.ResourceRequestsPrefix+r] = q.DeepCopy()
		}
		if q, ok := limits[r]; ok {
			out[api.ResourceLimitsPrefix+r] = q.DeepCopy()
		}
	}
	for name, q := range requests {
		if strings.HasPrefix(name, "hugepages-") {
			out[name] = q.DeepCopy()
			out[api.ResourceRequestsPrefix+name] = q.DeepCopy()
		}
		if isExtended(name) {
			out[api.ResourceRequestsPrefix+name] = q.DeepCopy()
		}
	}
}

// isExtended: a resource with a domain outside kubernetes.io.
func isExtended(name string) bool {
	i := strings.IndexByte(name, '/')
	if i < 0 || strings.HasPrefix(name, api.ResourceRequestsPrefix) {
		return false
	}
	domain := name[:i]
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// podRequests is Kubernetes' PodRequests for what a skiff pod has: the
// containers' sum, or the largest init container's when larger (init
// containers run one at a time).
func podRequests(s *api.PodSpec) api.ResourceList {
	return podTotal(s, func(c *api.Container) api.ResourceList { return c.Resources.Requests })
}

// podLimits is Kubernetes' PodLimits: the same over the limits set.
func podLimits(s *api.PodSpec) api.ResourceList {
	return podTotal(s, func(c *api.Container) api.ResourceList { return c.Resources.Limits })
}

func podTotal(s *api.PodSpec, of func(*api.Container) api.ResourceList) api.ResourceList {
	sum := api.ResourceList{}
	for i := range s.Containers {
		sum = Add(sum, of(&s.Containers[i]))
	}
	for i := range s.InitContainers {
		for name, q := range of(&s.InitContainers[i]) {
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	return sum
}

// Constraints is the pod evaluator's check that every container names each
// compute resource a quota caps: "must specify limits.cpu for: web;
// requests.memory for: web,sidecar".
func Constraints(required []string, p *api.Pod) error {
	missing := map[string][]string{}
	check := func(c *api.Container) {
		have := api.ResourceList{}
		podComputeUsage(have, c.Resources.Requests, c.Resources.Limits)
		for _, r := range required {
			if !slices.Contains(podConstrained, r) {
				continue
			}
			if _, ok := have[r]; !ok && !slices.Contains(missing[r], c.Name) {
				missing[r] = append(missing[r], c.Name)
			}
		}
	}
	for i := range p.Spec.Containers {
		check(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		check(&p.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for r := range missing {
		names = append(names, r)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, r := range names {
		cs := missing[r]
		slices.Sort(cs)
		parts[i] = fmt.Sprintf("%s for: %s", r, strings.Join(cs, ","))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

// Matches reports whether quota q counts obj of kind k: it caps something
// k's objects use and obj is in every one of its scopes (Kubernetes'
// generic.Matches).
func Matches(q *api.ResourceQuota, k *api.Kind, obj api.Object) bool {
	covered := false
	for name := range q.Status.Hard {
		if Covers(k, name) {
			covered = true
			break
		}
	}
	if !covered {
		return false
	}
	for _, sel := range Selectors(q) {
		if !scopeMatches(sel, k, obj) {
			return false
		}
	}
	return true
}

// Selectors are a quota's scopes and scope selector, as expressions.
func Selectors(q *api.ResourceQuota) []api.ScopedResourceSelectorRequirement {
	var out []api.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, api.ScopedResourceSelectorRequirement{ScopeName: s, Operator: api.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// scopeMatches is Kubernetes' podMatchesScopeFunc; scopes concern pods
// only, other kinds never match a scoped quota.
func scopeMatches(sel api.ScopedResourceSelectorRequirement, k *api.Kind, obj api.Object) bool {
	p, ok := obj.(*api.Pod)
	if !ok {
		return false
	}
	switch sel.ScopeName {
	case api.ResourceQuotaScopeTerminating:
		return terminating(p)
	case api.ResourceQuotaScopeNotTerminating:
		return !terminating(p)
	case api.ResourceQuotaScopeBestEffort:
		return bestEffort(p)
	case api.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(p)
	case api.ResourceQuotaScopePriorityClass:
		if sel.Operator == api.ScopeSelectorOpExists {
			return p.Spec.PriorityClassName != ""
		}
		op := map[string]selection.Operator{api.ScopeSelectorOpIn: selection.In, api.ScopeSelectorOpNotIn: selection.NotIn,
			api.ScopeSelectorOpDoesNotExist: selection.DoesNotExist}[sel.Operator]
		req, err := labels.NewRequirement(api.ResourceQuotaScopePriorityClass, op, sel.Values)
		if err != nil {
			return false
		}
		var set labels.Set
		if p.Spec.PriorityClassName != "" {
			set = labels.Set{api.ResourceQuotaScopePriorityClass: p.Spec.PriorityClassName}
		}
		return req.Matches(set)
	}
	return false
}

// terminating is Kubernetes' IsTerminating: the pod has an active deadline.
func terminating(p *api.Pod) bool {
	return p.Spec.ActiveDeadlineSeconds != nil && *p.Spec.ActiveDeadlineSeconds >= 0
}

// bestEffort is Kubernetes' QoS class BestEffort: no container (init ones
// included) asks for or limits cpu or memory.
func bestEffort(p *api.Pod) bool {
	for _, cs := range [][]api.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, list := range []api.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for _, r := range []string{api.ResourceCPU, api.ResourceMemory} {
					if q, ok := list[r]; ok && !q.IsZero() {
						return false
					}
				}
			}
		}
	}
	return true
}
