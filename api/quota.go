package api

// # Quotas and limit ranges
//
// ResourceQuota caps what one namespace may hold: hard limits on compute
// (requests.cpu, limits.memory, requests.nvidia.com/gpu: extended
// resources are quota'd as requests.* only), on storage
// (requests.storage, persistentvolumeclaims, CLASS.storageclass.storage.k8s.io/...)
// and on object counts (pods, services, configmaps, secrets, count/pods,
// count/jobs.batch, count/RESOURCE.GROUP). The API server refuses a
// create that would go over (controlplane/apiserver/admission_quota.go,
// Kubernetes' words); the resourcequota controller keeps status.used
// exact (controlplane/controllers/resourcequota.go); both count with
// controlplane/quota.
//
// LimitRange gives a namespace's containers default requests and limits
// and bounds them (min, max, maxLimitRequestRatio), per Container, per
// Pod (the sum) and per PersistentVolumeClaim (storage); admission applies
// the defaults before quota counts (admission_limitrange.go).

// ResourceQuota sets aggregate quota restrictions enforced per namespace.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ResourceQuota struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the hard limits and the scopes they apply to.
	Spec ResourceQuotaSpec `json:"spec,omitempty"`
	// Status: the enforced hard limits and what is used, written by the
	// resourcequota controller and by admission.
	Status ResourceQuotaStatus `json:"status,omitempty"`
}

// ResourceQuotaSpec defines the desired hard limits to enforce for Quota.
type ResourceQuotaSpec struct {
	// Hard is the set of desired hard limits for each named resource.
	Hard ResourceList `json:"hard,omitempty"`
	// Scopes: only objects that match every scope are counted
	// (Terminating, NotTerminating, BestEffort, NotBestEffort,
	// PriorityClass).
	Scopes []string `json:"scopes,omitempty"`
	// ScopeSelector is a collection of filters like scopes that must
	// match each object tracked by a quota, with operators.
	ScopeSelector *ScopeSelector `json:"scopeSelector,omitempty"`
}

// ScopeSelector is the scopes of a quota as expressions.
type ScopeSelector struct {
	// MatchExpressions: a list of scope selector requirements by scope of the resources.
	MatchExpressions []ScopedResourceSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ScopedResourceSelectorRequirement is one scope with an operator.
type ScopedResourceSelectorRequirement struct {
	// ScopeName: the name of the scope that the selector applies to.
	ScopeName string `json:"scopeName"`
	// Operator: In, NotIn, Exists, DoesNotExist.
	Operator string `json:"operator"`
	// Values: for In and NotIn (PriorityClass names).
	Values []string `json:"values,omitempty"`
}

// ResourceQuotaStatus defines the enforced hard limits and observed use.
type ResourceQuotaStatus struct {
	// Hard is the set of enforced hard limits for each named resource.
	Hard ResourceList `json:"hard,omitempty"`
	// Used is the current observed total usage of the resource in the namespace.
	Used ResourceList `json:"used,omitempty"`
}

// Quota scopes, selector operators and the names of what a quota counts
// (core/v1).
const (
	ResourceQuotaScopeTerminating    = "Terminating"
	ResourceQuotaScopeNotTerminating = "NotTerminating"
	ResourceQuotaScopeBestEffort     = "BestEffort"
	ResourceQuotaScopeNotBestEffort  = "NotBestEffort"
	ResourceQuotaScopePriorityClass  = "PriorityClass"
	// Scopes Kubernetes has that skiff refuses (validation says so).
	ResourceQuotaScopeCrossNamespacePodAffinity = "CrossNamespacePodAffinity"
	ResourceQuotaScopeVolumeAttributesClass     = "VolumeAttributesClass"

	ScopeSelectorOpIn           = "In"
	ScopeSelectorOpNotIn        = "NotIn"
	ScopeSelectorOpExists       = "Exists"
	ScopeSelectorOpDoesNotExist = "DoesNotExist"

	// ResourceRequestsPrefix marks a quota on requests (requests.nvidia.com/gpu).
	ResourceRequestsPrefix = "requests."
	// ResourceLimitsPrefix marks a quota on limits.
	ResourceLimitsPrefix = "limits."
	// ObjectCountPrefix marks a quota on a count of objects (count/jobs.batch).
	ObjectCountPrefix = "count/"
	// StorageClassQuotaInfix: CLASS.storageclass.storage.k8s.io/requests.storage.
	StorageClassQuotaInfix = ".storageclass.storage.k8s.io/"
)

// LimitRange sets resource usage limits for each kind of resource in a namespace.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type LimitRange struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the limits enforced.
	Spec LimitRangeSpec `json:"spec,omitempty"`
}

// LimitRangeSpec defines a min/max usage limit for resources that match on kind.
type LimitRangeSpec struct {
	// Limits is the list of LimitRangeItem objects that are enforced.
	Limits []LimitRangeItem `json:"limits"`
}

// LimitRangeItem defines a min/max usage limit for any resource that matches on kind.
type LimitRangeItem struct {
	// Type of resource that this limit applies to: Container, Pod or PersistentVolumeClaim.
	Type string `json:"type"`
	// Max usage constraints on this kind by resource name.
	Max ResourceList `json:"max,omitempty"`
	// Min usage constraints on this kind by resource name.
	Min ResourceList `json:"min,omitempty"`
	// Default resource requirement limit value by resource name if resource limit is omitted.
	Default ResourceList `json:"default,omitempty"`
	// DefaultRequest is the default resource requirement request value by resource name if resource request is omitted.
	DefaultRequest ResourceList `json:"defaultRequest,omitempty"`
	// MaxLimitRequestRatio if specified, the named resource must have a request and limit that are both non-zero where limit divided by request is less than or equal to the enumerated value.
	MaxLimitRequestRatio ResourceList `json:"maxLimitRequestRatio,omitempty"`
}

// LimitRange item types.
const (
	LimitTypePod                   = "Pod"
	LimitTypeContainer             = "Container"
	LimitTypePersistentVolumeClaim = "PersistentVolumeClaim"
)

// QuotaReservationsAnnotation holds, on a ResourceQuota, the charges
// quota admission made for objects being created that the resourcequota
// controller has not counted yet (controlplane/quota: Reservation). It
// belongs to the quota's status: a status write brings it, a spec write
// keeps the stored one (api/strategy: SetStatus).
const QuotaReservationsAnnotation = "quota.skiff.dev/reservations"

// PrepareResourceQuota starts a new quota with status.hard = spec.hard
// and no usage: admission refuses what it covers ("status unknown for
// quota") until the resourcequota controller has counted, a moment
// later, instead of admitting uncounted objects (Kubernetes leaves the
// status empty, so a quota enforces nothing until counted). Reservations
// come from admission only.
func PrepareResourceQuota(q *ResourceQuota) {
	q.Status = ResourceQuotaStatus{Hard: ResourceList{}}
	for k, v := range q.Spec.Hard {
		q.Status.Hard[k] = v.DeepCopy()
	}
	delete(q.Annotations, QuotaReservationsAnnotation)
}

// AnnotationLimitRanger is what LimitRanger admission set on a pod
// ("LimitRanger plugin set: cpu, memory request for container web").
const AnnotationLimitRanger = "kubernetes.io/limit-ranger"

// defaultLimitRange is Kubernetes' SetDefaults_LimitRangeItem: for a
// Container item, a default limit defaults to max, a default request to
// the default limit, then to min.
func defaultLimitRange(lr *LimitRange) {
	for i := range lr.Spec.Limits {
		it := &lr.Spec.Limits[i]
		if it.Type != LimitTypeContainer {
			continue
		}
		if it.Default == nil {
			it.Default = ResourceList{}
		}
		if it.DefaultRequest == nil {
			it.DefaultRequest = ResourceList{}
		}
		for k, v := range it.Max {
			if _, ok := it.Default[k]; !ok {
				it.Default[k] = v.DeepCopy()
			}
		}
		for k, v := range it.Default {
			if _, ok := it.DefaultRequest[k]; !ok {
				it.DefaultRequest[k] = v.DeepCopy()
			}
		}
		for k, v := range it.Min {
			if _, ok := it.DefaultRequest[k]; !ok {
				it.DefaultRequest[k] = v.DeepCopy()
			}
		}
	}
}
