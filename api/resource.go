package api

import "encoding/json"

// Dynamic Resource Allocation (resource.k8s.io/v1), the successor of device
// plugins: a driver publishes its devices in ResourceSlices, a DeviceClass
// names a kind of device by CEL selectors, a ResourceClaim asks for devices
// (as a PersistentVolumeClaim asks for storage), and the scheduler allocates
// devices to the claim while it picks the pod's node: the allocation is
// written to the claim's status before the pod is bound, the kubelet then
// asks the driver to prepare the claim (NodePrepareResources) and the
// runtime injects the driver's CDI devices.
//
// The Go types follow k8s.io/api/resource/v1 field for field; fields skiff
// does not implement are refused with their path (strict.go). v1beta1 and
// v1beta2 are served too and converted to v1 (resource_convert.go).

// ResourceGroup is the API group of the DRA kinds.
const ResourceGroup = "resource.k8s.io"

// DRA names shared by the API server, the controller, the scheduler and the
// node agent, as Kubernetes spells them.
const (
	// ResourceClaimFinalizer keeps an allocated or reserved claim until it
	// is deallocated (k8s.io/api/resource/v1.Finalizer).
	ResourceClaimFinalizer = "resource.kubernetes.io/delete-protection"
	// PodResourceClaimAnnotation on a claim made from a template names the
	// pod's resourceClaims entry it was made for.
	PodResourceClaimAnnotation = "resource.kubernetes.io/pod-claim-name"
	// ResourceClaimReservedForMaxSize bounds status.reservedFor.
	ResourceClaimReservedForMaxSize = 256
	// DeviceRequestsMaxSize, DeviceConstraintsMaxSize, DeviceConfigMaxSize:
	// at most 32 requests, constraints and config entries per claim.
	DeviceRequestsMaxSize    = 32
	DeviceConstraintsMaxSize = 32
	DeviceConfigMaxSize      = 32
	// FirstAvailableDeviceRequestMaxSize bounds a request's firstAvailable.
	FirstAvailableDeviceRequestMaxSize = 8
	// DeviceSelectorsMaxSize bounds the selectors of a class or request.
	DeviceSelectorsMaxSize = 32
	// ResourceSliceMaxDevices bounds the devices of one slice; 64 when a
	// device has taints or consumes counters.
	ResourceSliceMaxDevices                             = 128
	ResourceSliceMaxDevicesWithTaintsOrConsumesCounters = 64
	// Partitionable devices (KEP-4815): at most 8 counter sets per slice,
	// 32 counters per set, 2 counter consumptions per device, 32 counters
	// per consumption.
	ResourceSliceMaxCounterSets                         = 8
	ResourceSliceMaxCountersPerCounterSet               = 32
	ResourceSliceMaxDeviceCounterConsumptionsPerDevice  = 2
	ResourceSliceMaxCountersPerDeviceCounterConsumption = 32
	// ResourceSliceMaxAttributesAndCapacitiesPerDevice bounds one device's
	// attributes and capacities together.
	ResourceSliceMaxAttributesAndCapacitiesPerDevice = 32
	// AllocationResultsMaxSize bounds the devices of one allocation.
	AllocationResultsMaxSize = 32
	// DeviceMaxIDLength bounds an attribute or capacity name (the part
	// after the domain); DeviceMaxDomainLength the domain.
	DeviceMaxIDLength     = 32
	DeviceMaxDomainLength = 63
	// DeviceAttributeMaxValueLength bounds a string or version attribute.
	DeviceAttributeMaxValueLength = 64
	// CELSelectorExpressionMaxLength bounds one CEL selector (10 Ki).
	CELSelectorExpressionMaxLength = 10 * 1024
	// CELSelectorExpressionMaxCost is the cost limit of one selector.
	CELSelectorExpressionMaxCost = 1000000
	// OpaqueParametersMaxLength bounds the opaque config of one entry.
	OpaqueParametersMaxLength = 10 * 1024

	// DeviceAllocationModeExactCount (the default) allocates Count devices;
	// DeviceAllocationModeAll every matching device, at least one.
	DeviceAllocationModeExactCount = "ExactCount"
	DeviceAllocationModeAll        = "All"

	// AllocationConfigSourceClass and ...Claim: where an allocated
	// config entry came from.
	AllocationConfigSourceClass = "FromClass"
	AllocationConfigSourceClaim = "FromClaim"

	// Device taint effects and toleration operators.
	DeviceTaintEffectNoSchedule = "NoSchedule"
	DeviceTaintEffectNoExecute  = "NoExecute"
	DeviceTolerationOpExists    = "Exists"
	DeviceTolerationOpEqual     = "Equal"
)

// DeviceClass is a kind of device, chosen by CEL selectors, with config
// for its driver (cluster-scoped). A request names one.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type DeviceClass struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the selectors and config.
	Spec DeviceClassSpec `json:"spec"`
}

// DeviceClassSpec is what a DeviceClass selects and configures.
type DeviceClassSpec struct {
	// Selectors a device must all satisfy to be of this class.
	Selectors []DeviceSelector `json:"selectors,omitempty"`
	// Config for the drivers of the devices allocated through this class.
	Config []DeviceClassConfiguration `json:"config,omitempty"`
}

// DeviceClassConfiguration is one config entry of a class.
type DeviceClassConfiguration struct {
	DeviceConfiguration `json:",inline"`
}

// DeviceConfiguration is config for a driver.
type DeviceConfiguration struct {
	// Opaque: parameters only the driver reads.
	Opaque *OpaqueDeviceConfiguration `json:"opaque,omitempty"`
}

// OpaqueDeviceConfiguration is config in the driver's own format.
type OpaqueDeviceConfiguration struct {
	// Driver the parameters are for (a DNS subdomain, e.g. gpu.nvidia.com).
	Driver string `json:"driver"`
	// Parameters: any JSON object, passed to the driver as it is.
	Parameters json.RawMessage `json:"parameters"`
}

// DeviceSelector chooses devices: one CEL expression.
type DeviceSelector struct {
	// CEL: an expression over `device` that must be true.
	CEL *CELDeviceSelector `json:"cel,omitempty"`
}

// CELDeviceSelector is a CEL expression over one device: device.driver,
// device.attributes["DOMAIN"].NAME, device.capacity["DOMAIN"].NAME (a
// quantity), device.allowMultipleAllocations. Names without a domain
// belong to the device's driver.
type CELDeviceSelector struct {
	// Expression, e.g. `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`.
	Expression string `json:"expression"`
}

// ResourceClaim asks for devices (namespaced). Pods name it in
// spec.resourceClaims; the scheduler allocates its devices and reserves it
// for the pods that use it.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ResourceClaim struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the devices wanted. Immutable.
	Spec ResourceClaimSpec `json:"spec"`
	// Status: the allocation and who uses the claim.
	Status ResourceClaimStatus `json:"status,omitempty"`
}

// ResourceClaimSpec is what a claim asks for.
type ResourceClaimSpec struct {
	// Devices: the requests, constraints between them, and config.
	Devices DeviceClaim `json:"devices"`
}

// DeviceClaim is the device part of a claim.
type DeviceClaim struct {
	// Requests, each for devices of one class.
	Requests []DeviceRequest `json:"requests"`
	// Constraints across the devices of several requests.
	Constraints []DeviceConstraint `json:"constraints,omitempty"`
	// Config for the drivers of the allocated devices.
	Config []DeviceClaimConfiguration `json:"config,omitempty"`
}

// DeviceRequest asks for devices: exactly (one class, a count) or the first
// available of several alternatives.
type DeviceRequest struct {
	// Name of the request, unique in the claim; containers name it in
	// resources.claims[].request.
	Name string `json:"name"`
	// Exactly: devices of one class.
	Exactly *ExactDeviceRequest `json:"exactly,omitempty"`
	// FirstAvailable: alternatives in order of preference (at most 8);
	// the first that can be allocated is.
	FirstAvailable []DeviceSubRequest `json:"firstAvailable,omitempty"`
}

// ExactDeviceRequest asks for devices of one class.
type ExactDeviceRequest struct {
	// DeviceClassName: the class the devices must be of.
	DeviceClassName string `json:"deviceClassName"`
	// Selectors the devices must also satisfy.
	Selectors []DeviceSelector `json:"selectors,omitempty"`
	// AllocationMode: ExactCount (the default) or All.
	AllocationMode string `json:"allocationMode,omitempty"`
	// Count of devices with ExactCount (default 1).
	Count int64 `json:"count,omitempty"`
	// Tolerations of device taints.
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`
}

// DeviceSubRequest is one alternative of a firstAvailable request.
type DeviceSubRequest struct {
	// Name of the alternative; results name it REQUEST/SUBREQUEST.
	Name string `json:"name"`
	// DeviceClassName: the class the devices must be of.
	DeviceClassName string `json:"deviceClassName"`
	// Selectors the devices must also satisfy.
	Selectors []DeviceSelector `json:"selectors,omitempty"`
	// AllocationMode: ExactCount (the default) or All.
	AllocationMode string `json:"allocationMode,omitempty"`
	// Count of devices with ExactCount (default 1).
	Count int64 `json:"count,omitempty"`
	// Tolerations of device taints.
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`
}

// DeviceToleration tolerates a device taint.
type DeviceToleration struct {
	Key string `json:"key,omitempty"`
	// Operator: Equal (the default) or Exists.
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	// Effect to tolerate: NoSchedule, NoExecute, or empty for all.
	Effect string `json:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// DeviceConstraint relates the devices of several requests.
type DeviceConstraint struct {
	// Requests the constraint applies to (all when empty).
	Requests []string `json:"requests,omitempty"`
	// MatchAttribute: all devices have this attribute with one value
	// (e.g. one NVLink domain).
	MatchAttribute *string `json:"matchAttribute,omitempty"`
	// DistinctAttribute: all devices have this attribute, each a different value.
	DistinctAttribute *string `json:"distinctAttribute,omitempty"`
}

// DeviceClaimConfiguration is config for some of a claim's requests.
type DeviceClaimConfiguration struct {
	// Requests it applies to (all when empty).
	Requests            []string `json:"requests,omitempty"`
	DeviceConfiguration `json:",inline"`
}

// ResourceClaimStatus: the allocation and the consumers.
type ResourceClaimStatus struct {
	// Allocation, written by the scheduler before the pod is bound.
	Allocation *AllocationResult `json:"allocation,omitempty"`
	// ReservedFor: the pods using the claim (at most 256). A claim with
	// consumers is neither deallocated nor deleted.
	ReservedFor []ResourceClaimConsumerReference `json:"reservedFor,omitempty"`
}

// ResourceClaimConsumerReference names a consumer (a pod).
type ResourceClaimConsumerReference struct {
	// APIGroup of the consumer ("" for pods).
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource: "pods".
	Resource string `json:"resource"`
	Name     string `json:"name"`
	UID      string `json:"uid"`
}

// AllocationResult: which devices, and where they can be used.
type AllocationResult struct {
	// Devices allocated, and their config.
	Devices DeviceAllocationResult `json:"devices,omitempty"`
	// NodeSelector: the nodes the devices can be used on.
	NodeSelector *NodeSelector `json:"nodeSelector,omitempty"`
	// AllocationTimestamp: when the allocation was made.
	AllocationTimestamp *Time `json:"allocationTimestamp,omitempty"`
}

// DeviceAllocationResult lists the allocated devices.
type DeviceAllocationResult struct {
	// Results: one per allocated device.
	Results []DeviceRequestAllocationResult `json:"results,omitempty"`
	// Config from the classes and the claim, in that order.
	Config []DeviceAllocationConfiguration `json:"config,omitempty"`
}

// DeviceRequestAllocationResult is one allocated device.
type DeviceRequestAllocationResult struct {
	// Request: the request's name (REQUEST/SUBREQUEST for firstAvailable).
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// Tolerations the device's taints were tolerated with.
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`
}

// DeviceAllocationConfiguration is one config entry of an allocation.
type DeviceAllocationConfiguration struct {
	// Source: FromClass or FromClaim.
	Source string `json:"source"`
	// Requests it applies to (all when empty).
	Requests            []string `json:"requests,omitempty"`
	DeviceConfiguration `json:",inline"`
}

// ResourceClaimTemplate makes one claim per pod (namespaced): a pod naming
// it in spec.resourceClaims gets its own claim, POD-CLAIM-XXXXX, owned by
// the pod and deleted with it.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ResourceClaimTemplate struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: the claim to make.
	Spec ResourceClaimTemplateSpec `json:"spec"`
}

// ResourceClaimTemplateSpec: labels and annotations for the claim, and its spec.
type ResourceClaimTemplateSpec struct {
	ObjectMeta `json:"metadata,omitempty"`
	Spec       ResourceClaimSpec `json:"spec"`
}

// ResourceSlice publishes some devices of one driver's pool (cluster-scoped).
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ResourceSlice struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	Spec       ResourceSliceSpec `json:"spec"`
}

// ResourceSliceSpec: the driver, the pool, where the devices are, the devices.
type ResourceSliceSpec struct {
	// Driver: a DNS subdomain, e.g. gpu.nvidia.com.
	Driver string `json:"driver"`
	// Pool the slice belongs to.
	Pool ResourcePool `json:"pool"`
	// NodeName: the node the devices are on (one of nodeName,
	// nodeSelector, allNodes).
	NodeName *string `json:"nodeName,omitempty"`
	// NodeSelector: the nodes the devices can be used on.
	NodeSelector *NodeSelector `json:"nodeSelector,omitempty"`
	// AllNodes: the devices can be used on every node.
	AllNodes *bool `json:"allNodes,omitempty"`
	// Devices (at most 128). Only one of devices and sharedCounters.
	Devices []Device `json:"devices,omitempty"`
	// SharedCounters: counter sets the pool's devices consume from
	// (partitionable devices, KEP-4815: a GPU's memory slices, which its
	// MIG devices share); names unique in the pool, at most 8.
	SharedCounters []CounterSet `json:"sharedCounters,omitempty"`
}

// CounterSet is a named set of counters a pool's devices draw from. The
// counters are not allocated themselves: an allocated device takes its
// share, which no other device can then have.
type CounterSet struct {
	// Name, a DNS label.
	Name string `json:"name"`
	// Counters by name (DNS labels), at most 32.
	Counters map[string]Counter `json:"counters,omitempty"`
}

// Counter is an amount of a counter.
type Counter struct {
	Value Quantity `json:"value"`
}

// DeviceCounterConsumption is what a device takes from one counter set.
type DeviceCounterConsumption struct {
	// CounterSet names a counter set of the pool's sharedCounters.
	CounterSet string `json:"counterSet"`
	// Counters the device takes, by name, at most 32.
	Counters map[string]Counter `json:"counters,omitempty"`
}

// ResourcePool names a pool and how many slices it has.
type ResourcePool struct {
	Name string `json:"name"`
	// Generation: slices of an older generation than the newest are ignored.
	Generation int64 `json:"generation"`
	// ResourceSliceCount: the slices the pool has in this generation.
	ResourceSliceCount int64 `json:"resourceSliceCount"`
}

// Device is one device: name, typed attributes and capacities.
type Device struct {
	// Name, unique in the pool (a DNS label), e.g. gpu-0.
	Name string `json:"name"`
	// Attributes by name (DOMAIN/ID, or ID for the driver's own).
	Attributes map[string]DeviceAttribute `json:"attributes,omitempty"`
	// Capacity by name, e.g. memory: 80Gi.
	Capacity map[string]DeviceCapacity `json:"capacity,omitempty"`
	// Taints: a device with a NoSchedule taint is allocated only to
	// claims tolerating it.
	Taints []DeviceTaint `json:"taints,omitempty"`
	// ConsumesCounters: what the device takes from the pool's counter
	// sets when allocated (one entry per set, at most 2); the allocator
	// never hands out devices whose sum exceeds a set's counters.
	ConsumesCounters []DeviceCounterConsumption `json:"consumesCounters,omitempty"`
}

// DeviceAttribute is one typed value: exactly one of int, bool, string, version.
type DeviceAttribute struct {
	IntValue    *int64  `json:"int,omitempty"`
	BoolValue   *bool   `json:"bool,omitempty"`
	StringValue *string `json:"string,omitempty"`
	// VersionValue: a semantic version, e.g. 12.4.0.
	VersionValue *string `json:"version,omitempty"`
}

// DeviceCapacity is one capacity of a device.
type DeviceCapacity struct {
	Value Quantity `json:"value"`
}

// DeviceTaint marks a device: claims must tolerate it.
type DeviceTaint struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	// Effect: NoSchedule or NoExecute.
	Effect    string `json:"effect"`
	TimeAdded *Time  `json:"timeAdded,omitempty"`
}

// Pod side of DRA (in PodSpec, Container.Resources and PodStatus).

// PodResourceClaim names a claim for a pod: an existing claim or a template.
type PodResourceClaim struct {
	// Name of the entry in the pod, referenced by containers.
	Name string `json:"name"`
	// ResourceClaimName: an existing claim in the pod's namespace.
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// ResourceClaimTemplateName: a template a claim is made from for this pod.
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// ResourceClaim (in a container's resources.claims) gives the container
// the devices of one pod claim, or of one request of it.
type ContainerResourceClaim struct {
	// Name of an entry of the pod's spec.resourceClaims.
	Name string `json:"name"`
	// Request: only this request's devices (all when empty).
	Request string `json:"request,omitempty"`
}

// PodResourceClaimStatus names the claim made for a template entry.
type PodResourceClaimStatus struct {
	// Name of the pod's spec.resourceClaims entry.
	Name string `json:"name"`
	// ResourceClaimName: the claim made for it (unset when none is needed).
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
}

// ClaimName returns the name of the claim a pod's entry stands for, and
// whether it is known: the entry's resourceClaimName, or the claim the
// controller made from the template, from the pod's status.
func ClaimName(pod *Pod, c *PodResourceClaim) (string, bool) {
	if c.ResourceClaimName != nil {
		return *c.ResourceClaimName, true
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == c.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName, true
		}
	}
	return "", false
}

// IsReservedFor reports whether the claim lists the pod as a consumer.
func (c *ResourceClaim) IsReservedFor(uid string) bool {
	for _, r := range c.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}
