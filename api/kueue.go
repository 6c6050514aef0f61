package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kueue (kueue.x-k8s.io), the job queueing system of Kubernetes SIG
// Scheduling, as its v0.19 API: quota for batch work, shared by teams. A
// ClusterQueue holds quota (per ResourceFlavor, per resource), a LocalQueue
// in a namespace points at one, and a Job labelled
// kueue.x-k8s.io/queue-name: LOCALQUEUE waits, suspended, as a Workload
// until its ClusterQueue admits it (controlplane/kueue, the role of Kueue's
// manager). v1beta2 is the stored version; v1beta1 is served too, with
// Kueue's deprecation warning (kueueV1beta1, api/versions.go).
//
// Fields Kueue has and skiff does not (fair sharing, admission checks,
// MultiKueue, flavor fungibility, ...) are refused by name (strict.go).

// KueueGroup is Kueue's API group.
const KueueGroup = "kueue.x-k8s.io"

// Kueue's labels, annotations, queueing strategies, preemption policies,
// condition types and reasons (apis/kueue/v1beta2, pkg/controller/constants).
const (
	// QueueNameLabel on a Job names its LocalQueue.
	QueueNameLabel = "kueue.x-k8s.io/queue-name"
	// PodSetRequiredTopologyAnnotation on a pod template: all pods in one
	// domain of this node label.
	PodSetRequiredTopologyAnnotation = "kueue.x-k8s.io/podset-required-topology"
	// PodSetPreferredTopologyAnnotation: one domain if one has room, else
	// wherever quota allows.
	PodSetPreferredTopologyAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
	// WorkloadPriorityClassLabel names a WorkloadPriorityClass (not served).
	WorkloadPriorityClassLabel = "kueue.x-k8s.io/priority-class"

	StrictFIFO     = "StrictFIFO"
	BestEffortFIFO = "BestEffortFIFO"

	KueuePreemptNever                     = "Never"
	KueuePreemptAny                       = "Any"
	KueuePreemptLowerPriority             = "LowerPriority"
	KueuePreemptLowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"

	StopPolicyNone         = "None"
	StopPolicyHold         = "Hold"
	StopPolicyHoldAndDrain = "HoldAndDrain"

	WorkloadQuotaReserved = "QuotaReserved"
	WorkloadAdmitted      = "Admitted"
	WorkloadFinished      = "Finished"
	WorkloadPodsReady     = "PodsReady"
	WorkloadEvicted       = "Evicted"
	WorkloadPreempted     = "Preempted"
	WorkloadRequeued      = "Requeued"

	WorkloadPending                   = "Pending"
	WorkloadInadmissible              = "Inadmissible"
	WorkloadEvictedByPreemption       = "Preempted"
	WorkloadEvictedByPodsReadyTimeout = "PodsReadyTimeout"
	WorkloadBackoffFinished           = "BackoffFinished"
	WorkloadFinishedReasonSucceeded   = "Succeeded"
	WorkloadFinishedReasonFailed      = "Failed"
	InClusterQueueReason              = "InClusterQueue"
	InCohortReclamationReason         = "InCohortReclamation"
	ClusterQueueActive                = "Active"

	PodPriorityClassGroup = "scheduling.k8s.io"
	PodPriorityClassKind  = "PriorityClass"
)

// ResourceFlavor (rf, flavor) is a kind of node quota is counted in: the
// nodes its nodeLabels select, with its taints. An empty flavor means any
// node.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ResourceFlavor struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorSpec of a flavor.
type ResourceFlavorSpec struct {
	// NodeLabels of the flavor's nodes (at most 8): merged into an admitted
	// job's pod template nodeSelector.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// NodeTaints the flavor's nodes carry (at most 8): a workload that does
	// not tolerate them does not fit the flavor.
	NodeTaints []Taint `json:"nodeTaints,omitempty"`
	// Tolerations appended to an admitted job's pod template (at most 8).
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// TopologyName: the Topology of the flavor's nodes, for topology-aware
	// scheduling (needs nodeLabels).
	TopologyName *string `json:"topologyName,omitempty"`
}

// ClusterQueue (cq) holds quota, per flavor per resource, and admits
// workloads from its LocalQueues in its queueing strategy's order.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ClusterQueue struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       ClusterQueueSpec   `json:"spec,omitempty"`
	Status     ClusterQueueStatus `json:"status,omitempty"`
}

// ClusterQueueSpec of a ClusterQueue.
type ClusterQueueSpec struct {
	// ResourceGroups: resources counted together, each with flavors tried
	// in order (at most 16).
	ResourceGroups []QueueResourceGroup `json:"resourceGroups,omitempty"`
	// CohortName: ClusterQueues of one cohort lend unused quota to each
	// other (v1beta1: cohort).
	CohortName string `json:"cohortName,omitempty"`
	// QueueingStrategy: BestEffortFIFO (default: a workload that does not
	// fit lets later ones try) or StrictFIFO (the head blocks the queue).
	QueueingStrategy string `json:"queueingStrategy,omitempty"`
	// NamespaceSelector: namespaces whose workloads may use the queue. nil
	// selects none, {} all.
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// Preemption: whom a pending workload may evict.
	Preemption *ClusterQueuePreemption `json:"preemption,omitempty"`
	// StopPolicy: None (default), Hold (admit nothing new) or
	// HoldAndDrain (also evict the admitted).
	StopPolicy *string `json:"stopPolicy,omitempty"`
}

// QueueResourceGroup is Kueue's ResourceGroup: covered resources and the
// flavors that hold quota for them, in order of preference.
type QueueResourceGroup struct {
	// CoveredResources (at most 64).
	CoveredResources []string `json:"coveredResources,omitempty"`
	// Flavors (at most 16): each lists every covered resource.
	Flavors []FlavorQuotas `json:"flavors,omitempty"`
}

// FlavorQuotas is one flavor's quota for the covered resources.
type FlavorQuotas struct {
	Name      string                `json:"name"`
	Resources []FlavorResourceQuota `json:"resources,omitempty"`
}

// FlavorResourceQuota is Kueue's ResourceQuota: quota of one resource in
// one flavor.
type FlavorResourceQuota struct {
	Name string `json:"name,omitempty"`
	// NominalQuota: what the queue owns.
	NominalQuota Quantity `json:"nominalQuota,omitempty"`
	// BorrowingLimit: the most it may borrow from its cohort (nil: no
	// limit; needs a cohort).
	BorrowingLimit *Quantity `json:"borrowingLimit,omitempty"`
	// LendingLimit: the most of its unused quota it lends (nil: all).
	LendingLimit *Quantity `json:"lendingLimit,omitempty"`
}

// ClusterQueuePreemption: when a pending workload may evict admitted ones.
type ClusterQueuePreemption struct {
	// ReclaimWithinCohort: Never (default), LowerPriority or Any: evict
	// workloads of other queues of the cohort that borrow this queue's
	// quota.
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
	// BorrowWithinCohort: preempting in the cohort while borrowing.
	BorrowWithinCohort *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`
	// WithinClusterQueue: Never (default), LowerPriority or
	// LowerOrNewerEqualPriority: evict this queue's own workloads.
	WithinClusterQueue string `json:"withinClusterQueue,omitempty"`
}

// BorrowWithinCohort policy.
type BorrowWithinCohort struct {
	Policy               string `json:"policy,omitempty"`
	MaxPriorityThreshold *int32 `json:"maxPriorityThreshold,omitempty"`
}

// ClusterQueueStatus, written by the queue manager.
type ClusterQueueStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// FlavorsReservation: quota reserved, per flavor and resource.
	FlavorsReservation []FlavorUsage `json:"flavorsReservation,omitempty"`
	// FlavorsUsage: quota used by admitted workloads.
	FlavorsUsage []FlavorUsage `json:"flavorsUsage,omitempty"`
	// PendingWorkloads waiting for quota.
	PendingWorkloads int32 `json:"pendingWorkloads"`
	// ReservingWorkloads holding quota.
	ReservingWorkloads int32 `json:"reservingWorkloads"`
	// AdmittedWorkloads admitted and not finished.
	AdmittedWorkloads int32 `json:"admittedWorkloads"`
}

// FlavorUsage of one flavor.
type FlavorUsage struct {
	Name      string                `json:"name,omitempty"`
	Resources []FlavorResourceUsage `json:"resources,omitempty"`
}

// FlavorResourceUsage is Kueue's ResourceUsage: total in use and how much
// of it is borrowed from the cohort.
type FlavorResourceUsage struct {
	Name     string   `json:"name,omitempty"`
	Total    Quantity `json:"total,omitempty"`
	Borrowed Quantity `json:"borrowed,omitempty"`
}

// LocalQueue (queue, lq) is a namespace's door to a ClusterQueue.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type LocalQueue struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       LocalQueueSpec   `json:"spec"`
	Status     LocalQueueStatus `json:"status,omitempty"`
}

// LocalQueueSpec of a LocalQueue.
type LocalQueueSpec struct {
	// ClusterQueue backing this queue. Immutable.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// StopPolicy: None, Hold or HoldAndDrain.
	StopPolicy *string `json:"stopPolicy,omitempty"`
}

// LocalQueueStatus, written by the queue manager.
type LocalQueueStatus struct {
	Conditions         []metav1.Condition      `json:"conditions,omitempty"`
	PendingWorkloads   int32                   `json:"pendingWorkloads"`
	ReservingWorkloads int32                   `json:"reservingWorkloads"`
	AdmittedWorkloads  int32                   `json:"admittedWorkloads"`
	FlavorsReservation []LocalQueueFlavorUsage `json:"flavorsReservation,omitempty"`
	// FlavorsUsage (v1beta1: flavorUsage).
	FlavorsUsage []LocalQueueFlavorUsage `json:"flavorsUsage,omitempty"`
}

// LocalQueueFlavorUsage of one flavor by a LocalQueue's workloads.
type LocalQueueFlavorUsage struct {
	Name      string                    `json:"name"`
	Resources []LocalQueueResourceUsage `json:"resources,omitempty"`
}

// LocalQueueResourceUsage of one resource.
type LocalQueueResourceUsage struct {
	Name  string   `json:"name,omitempty"`
	Total Quantity `json:"total,omitempty"`
}

// Workload (kwl) is one unit of admission: the pods of a Job, counted
// together against quota.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Workload struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       WorkloadSpec   `json:"spec"`
	Status     WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec of a Workload.
type WorkloadSpec struct {
	// PodSets: groups of identical pods (a Job has one, main). At most 8.
	PodSets []PodSet `json:"podSets"`
	// QueueName: the LocalQueue.
	QueueName string `json:"queueName,omitempty"`
	// PriorityClassRef: where priority came from (v1beta1:
	// priorityClassName and priorityClassSource).
	PriorityClassRef *PriorityClassRef `json:"priorityClassRef,omitempty"`
	// Priority: higher is admitted first and may preempt.
	Priority *int32 `json:"priority,omitempty"`
	// Active: false deactivates (evicts and holds) the workload.
	Active *bool `json:"active,omitempty"`
}

// PriorityClassRef names a PriorityClass (scheduling.k8s.io) or a
// WorkloadPriorityClass (kueue.x-k8s.io).
type PriorityClassRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name,omitempty"`
}

// PodSet is a group of identical pods.
type PodSet struct {
	Name     string          `json:"name,omitempty"`
	Template PodTemplateSpec `json:"template,omitempty"`
	// Count of pods.
	Count int32 `json:"count"`
	// MinCount: partial admission (not supported by skiff's manager).
	MinCount *int32 `json:"minCount,omitempty"`
	// TopologyRequest: the pods' topology-aware placement, from the pod
	// template's annotations.
	TopologyRequest *PodSetTopologyRequest `json:"topologyRequest,omitempty"`
}

// PodSetTopologyRequest: one domain of a topology level for all pods.
type PodSetTopologyRequest struct {
	Required  *string `json:"required,omitempty"`
	Preferred *string `json:"preferred,omitempty"`
}

// WorkloadStatus, written by the queue manager.
type WorkloadStatus struct {
	// Conditions: QuotaReserved, Admitted, PodsReady, Evicted, Requeued,
	// Finished.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Admission: where quota was reserved, and in which flavors.
	Admission *WorkloadAdmission `json:"admission,omitempty"`
	// RequeueState: backoff after a PodsReadyTimeout eviction.
	RequeueState *RequeueState `json:"requeueState,omitempty"`
}

// WorkloadAdmission is Kueue's Admission.
type WorkloadAdmission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// PodSetAssignment: the flavor of each resource of a pod set, the usage
// charged and, with topology-aware scheduling, the domain.
type PodSetAssignment struct {
	Name               string              `json:"name"`
	Flavors            map[string]string   `json:"flavors,omitempty"`
	ResourceUsage      ResourceList        `json:"resourceUsage,omitempty"`
	Count              *int32              `json:"count,omitempty"`
	TopologyAssignment *TopologyAssignment `json:"topologyAssignment,omitempty"`
}

// TopologyAssignment, Kueue v1beta2's compact form: skiff assigns one
// domain, so one slice of domainCount 1 with a universal value per level.
type TopologyAssignment struct {
	Levels []string                  `json:"levels,omitempty"`
	Slices []TopologyAssignmentSlice `json:"slices,omitempty"`
}

// TopologyAssignmentSlice: domains and their pod counts.
type TopologyAssignmentSlice struct {
	DomainCount    int32                                `json:"domainCount,omitempty"`
	ValuesPerLevel []TopologyAssignmentSliceLevelValues `json:"valuesPerLevel,omitempty"`
	PodCounts      TopologyAssignmentSlicePodCounts     `json:"podCounts,omitempty"`
}

// TopologyAssignmentSliceLevelValues: the level's value for every domain.
type TopologyAssignmentSliceLevelValues struct {
	Universal *string `json:"universal,omitempty"`
}

// TopologyAssignmentSlicePodCounts: pods per domain.
type TopologyAssignmentSlicePodCounts struct {
	Universal *int32 `json:"universal,omitempty"`
}

// RequeueState of a workload evicted for PodsReadyTimeout.
type RequeueState struct {
	Count     *int32 `json:"count,omitempty"`
	RequeueAt *Time  `json:"requeueAt,omitempty"`
}

// Topology (topo) lists node-label levels, from the widest (a block, an
// NVSwitch domain) to the narrowest (kubernetes.io/hostname).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Topology struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       TopologySpec `json:"spec"`
}

// TopologySpec of a Topology.
type TopologySpec struct {
	// Levels (1 to 16), each a node label.
	Levels []TopologyLevel `json:"levels,omitempty"`
}

// TopologyLevel is one node label.
type TopologyLevel struct {
	NodeLabel string `json:"nodeLabel,omitempty"`
}

// KueueDeprecationWarning is Kueue's warning for v1beta1
// (+kubebuilder:deprecatedversion).
const KueueDeprecationWarning = "This version is deprecated. Use v1beta2 instead."

// kueueV1beta1 is the v1beta1 served version of a Kueue kind, with conv
// (may be nil: the same shape) each way.
func kueueV1beta1(toStored, fromStored func(map[string]any) error) []ServedVersion {
	return []ServedVersion{{Version: "v1beta1", Warning: KueueDeprecationWarning, ToStored: toStored, FromStored: fromStored}}
}

// v1beta1 ClusterQueue: spec.cohort is v1beta2's spec.cohortName.
func clusterQueueToV1beta2(m map[string]any) error {
	if s := SubTree(m, "spec"); s != nil {
		RenameField(s, "cohort", "cohortName")
	}
	return nil
}

func clusterQueueToV1beta1(m map[string]any) error {
	if s := SubTree(m, "spec"); s != nil {
		RenameField(s, "cohortName", "cohort")
	}
	return nil
}

// v1beta1 LocalQueue: status.flavorUsage is v1beta2's status.flavorsUsage.
func localQueueToV1beta2(m map[string]any) error {
	if s := SubTree(m, "status"); s != nil {
		RenameField(s, "flavorUsage", "flavorsUsage")
	}
	return nil
}

func localQueueToV1beta1(m map[string]any) error {
	if s := SubTree(m, "status"); s != nil {
		RenameField(s, "flavorsUsage", "flavorUsage")
	}
	return nil
}

// Kueue v1beta1 priorityClassSource values.
const (
	v1beta1PodPriorityClassSource      = "scheduling.k8s.io/priorityclass"
	v1beta1WorkloadPriorityClassSource = "kueue.x-k8s.io/workloadpriorityclass"
)

// v1beta1 Workload: spec.priorityClassName + priorityClassSource are
// v1beta2's spec.priorityClassRef (as Kueue's workload_conversion.go); a
// topologyAssignment's domains[{values, count}] are v1beta2's slices.
func workloadToV1beta2(m map[string]any) error {
	if s := SubTree(m, "spec"); s != nil {
		name, hasName := s["priorityClassName"].(string)
		src, _ := s["priorityClassSource"].(string)
		delete(s, "priorityClassName")
		delete(s, "priorityClassSource")
		if hasName {
			switch src {
			case v1beta1PodPriorityClassSource:
				s["priorityClassRef"] = map[string]any{"group": PodPriorityClassGroup, "kind": PodPriorityClassKind, "name": name}
			case v1beta1WorkloadPriorityClassSource:
				s["priorityClassRef"] = map[string]any{"group": KueueGroup, "kind": "WorkloadPriorityClass", "name": name}
			}
		}
	}
	forEachTopologyAssignment(m, func(ta map[string]any) {
		domains, _ := ta["domains"].([]any)
		delete(ta, "domains")
		var slices []any
		for _, d := range domains {
			dm, _ := d.(map[string]any)
			values, _ := dm["values"].([]any)
			var vpl []any
			for _, v := range values {
				vpl = append(vpl, map[string]any{"universal": v})
			}
			slices = append(slices, map[string]any{"domainCount": 1, "valuesPerLevel": vpl, "podCounts": map[string]any{"universal": dm["count"]}})
		}
		if slices != nil {
			ta["slices"] = slices
		}
	})
	return nil
}

func workloadToV1beta1(m map[string]any) error {
	if s := SubTree(m, "spec"); s != nil {
		if ref := SubTree(s, "priorityClassRef"); ref != nil {
			delete(s, "priorityClassRef")
			switch {
			case ref["group"] == PodPriorityClassGroup && ref["kind"] == PodPriorityClassKind:
				s["priorityClassName"], s["priorityClassSource"] = ref["name"], v1beta1PodPriorityClassSource
			case ref["group"] == KueueGroup && ref["kind"] == "WorkloadPriorityClass":
				s["priorityClassName"], s["priorityClassSource"] = ref["name"], v1beta1WorkloadPriorityClassSource
			}
		}
	}
	forEachTopologyAssignment(m, func(ta map[string]any) {
		slices, _ := ta["slices"].([]any)
		delete(ta, "slices")
		domains := []any{}
		for _, sl := range slices { // skiff writes universal values only
			sm, _ := sl.(map[string]any)
			var values []any
			vpl, _ := sm["valuesPerLevel"].([]any)
			for _, v := range vpl {
				vm, _ := v.(map[string]any)
				values = append(values, vm["universal"])
			}
			count := any(0)
			if pc := SubTree(sm, "podCounts"); pc != nil && pc["universal"] != nil {
				count = pc["universal"]
			}
			domains = append(domains, map[string]any{"values": values, "count": count})
		}
		ta["domains"] = domains
	})
	return nil
}

func forEachTopologyAssignment(m map[string]any, fn func(map[string]any)) {
	adm := SubTree(m, "status", "admission")
	if adm == nil {
		return
	}
	psas, _ := adm["podSetAssignments"].([]any)
	for _, p := range psas {
		if pm, ok := p.(map[string]any); ok {
			if ta := SubTree(pm, "topologyAssignment"); ta != nil {
				fn(ta)
			}
		}
	}
}
