package api

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// IntOrString holds a port number or a port name (targetPort: 80 or "http").
type IntOrString = intstr.IntOrString

// Namespace is a scope for names. Deleting one deletes everything in it.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Namespace struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the namespace's finalizers.
	Spec NamespaceSpec `json:"spec,omitempty"`
	// Status: phase Active or Terminating.
	Status NamespaceStatus `json:"status,omitempty"`
}

// The namespaces every Kubernetes cluster has (metav1.NamespaceDefault,
// NamespaceSystem, NamespacePublic; corev1.NamespaceNodeLease).
const (
	// NamespaceDefault is where namespaced objects go when none is named.
	NamespaceDefault = "default"
	// NamespaceSystem holds the cluster's own components: node agents
	// such as NVIDIA's device plugin DaemonSet, the GPU operator's
	// ConfigMaps. Pod Security does not check it (kube-system is
	// privileged, as on kubeadm clusters).
	NamespaceSystem = "kube-system"
	// NamespacePublic is readable by everyone; it holds the cluster-info
	// ConfigMap (ClusterInfoConfigMap).
	NamespacePublic = "kube-public"
)

// SystemNamespaces are the four namespaces the API server creates at
// every start (kube-apiserver's system namespaces controller and its
// kubernetes Service controller): default, kube-system, kube-public and
// kube-node-lease. The first three may never be deleted
// (ImmortalNamespaces); kube-node-lease may, and comes back.
var SystemNamespaces = []string{NamespaceDefault, NamespaceSystem, NamespacePublic, NamespaceNodeLease}

// ImmortalNamespaces may not be deleted: kube-apiserver's
// NamespaceLifecycle admission answers `namespaces "kube-system" is
// forbidden: this namespace may not be deleted`.
var ImmortalNamespaces = []string{NamespaceDefault, NamespaceSystem, NamespacePublic}

// ClusterInfoConfigMap is kube-public/cluster-info as kubeadm writes it:
// data key ClusterInfoKubeconfigKey holds a kubeconfig with one cluster
// (named "") that has the API server's address and the cluster CA, and
// nothing else: what a machine needs to find and trust the cluster.
const (
	ClusterInfoConfigMap     = "cluster-info"
	ClusterInfoKubeconfigKey = "kubeconfig"
)

// NamespaceSpec of a namespace.
type NamespaceSpec struct {
	// Finalizers that must clear before the namespace is removed.
	Finalizers []string `json:"finalizers,omitempty"`
}

// NamespaceStatus of a namespace.
type NamespaceStatus struct {
	// Phase: Active or Terminating.
	Phase string `json:"phase,omitempty"`
}

// ConfigMap holds configuration as key/value pairs, mountable as files.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ConfigMap struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Data: UTF-8 values.
	Data map[string]string `json:"data,omitempty"`
	// BinaryData: base64 in JSON/YAML.
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	// Immutable forbids changes to Data once set.
	Immutable *bool `json:"immutable,omitempty"`
}

// Secret holds small sensitive values. skiff stores them unencrypted, as
// Kubernetes does by default.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Secret struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Data: base64-encoded values.
	Data map[string][]byte `json:"data,omitempty"`
	// StringData: write-only plain values, merged into Data on write.
	StringData map[string]string `json:"stringData,omitempty"`
	// Type, e.g. Opaque (default).
	Type string `json:"type,omitempty"`
	// Immutable forbids changes once set.
	Immutable *bool `json:"immutable,omitempty"`
}

// Service gives a stable virtual IP and name to a set of pods chosen by a selector.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Service struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: selector, ports and type.
	Spec ServiceSpec `json:"spec,omitempty"`
	// Status: load balancer (always empty here).
	Status ServiceStatus `json:"status,omitempty"`
}

// ServiceSpec of a service.
type ServiceSpec struct {
	// Type: ClusterIP (default) or NodePort.
	Type string `json:"type,omitempty"`
	// Selector chooses the pods behind the service by label.
	Selector map[string]string `json:"selector,omitempty"`
	// Ports the service exposes.
	Ports []ServicePort `json:"ports,omitempty"`
	// ClusterIP is allocated from the service CIDR unless given; "None" makes a headless service.
	ClusterIP string `json:"clusterIP,omitempty"`
	// ClusterIPs: the same, as a list.
	ClusterIPs []string `json:"clusterIPs,omitempty"`
	// SessionAffinity: None (default) or ClientIP.
	SessionAffinity string `json:"sessionAffinity,omitempty"`
	// ExternalTrafficPolicy: Cluster (default) or Local.
	ExternalTrafficPolicy string `json:"externalTrafficPolicy,omitempty"`
}

// ServicePort is one port of a service.
type ServicePort struct {
	// Name, required when there are several ports.
	Name string `json:"name,omitempty"`
	// Protocol: TCP (default) or UDP.
	Protocol string `json:"protocol,omitempty"`
	// Port of the service's virtual IP.
	Port int32 `json:"port"`
	// TargetPort on the pods: a number or a container port name (default: Port).
	TargetPort IntOrString `json:"targetPort,omitempty"`
	// NodePort on every node, 30000-32767, for type NodePort (allocated when 0).
	NodePort int32 `json:"nodePort,omitempty"`
}

// ServiceStatus of a service.
type ServiceStatus struct {
	LoadBalancer json.RawMessage `json:"loadBalancer,omitempty"`
}

// Endpoints list the addresses of the ready (and not-ready) pods behind a Service.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Endpoints struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Subsets of addresses sharing ports.
	Subsets []EndpointSubset `json:"subsets,omitempty"`
}

// EndpointSubset: addresses × ports.
type EndpointSubset struct {
	Addresses         []EndpointAddress `json:"addresses,omitempty"`
	NotReadyAddresses []EndpointAddress `json:"notReadyAddresses,omitempty"`
	Ports             []EndpointPort    `json:"ports,omitempty"`
}

// EndpointAddress is one pod's IP.
type EndpointAddress struct {
	IP        string           `json:"ip"`
	Hostname  string           `json:"hostname,omitempty"`
	NodeName  *string          `json:"nodeName,omitempty"`
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

// EndpointPort is one port of the endpoints.
type EndpointPort struct {
	Name     string `json:"name,omitempty"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// Node is a machine that runs pods, registered by its agent.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Node struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: pod CIDR, taints, unschedulable.
	Spec NodeSpec `json:"spec,omitempty"`
	// Status: capacity, allocatable, conditions, addresses.
	Status NodeStatus `json:"status,omitempty"`
}

// NodeSpec of a node.
type NodeSpec struct {
	// PodCIDR allocated to this node by the control plane.
	PodCIDR string `json:"podCIDR,omitempty"`
	// PodCIDRs: the same, as a list.
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// Unschedulable (cordoned): no new pods are placed here.
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Taints repel pods that do not tolerate them.
	Taints []Taint `json:"taints,omitempty"`
	// ProviderID is accepted for compatibility.
	ProviderID string `json:"providerID,omitempty"`
}

// Taint on a node.
type Taint struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	// Effect: NoSchedule, PreferNoSchedule or NoExecute.
	Effect    string `json:"effect"`
	TimeAdded *Time  `json:"timeAdded,omitempty"`
}

// NodeStatus of a node.
type NodeStatus struct {
	// Capacity: total resources of the node.
	Capacity ResourceList `json:"capacity,omitempty"`
	// Allocatable: what pods may use (capacity minus reserved, minus unhealthy devices).
	Allocatable ResourceList `json:"allocatable,omitempty"`
	// Phase is unused (as in Kubernetes).
	Phase string `json:"phase,omitempty"`
	// Conditions: Ready and friends.
	Conditions []NodeCondition `json:"conditions,omitempty"`
	// Addresses: InternalIP and Hostname.
	Addresses []NodeAddress `json:"addresses,omitempty"`
	// DaemonEndpoints: the agent's port for logs and exec.
	DaemonEndpoints NodeDaemonEndpoints `json:"daemonEndpoints,omitempty"`
	// NodeInfo: versions of the OS, runtime and agent.
	NodeInfo NodeSystemInfo `json:"nodeInfo,omitempty"`
	// Images present on the node.
	Images []ContainerImage `json:"images,omitempty"`
}

// NodeCondition is one condition of a node.
type NodeCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastHeartbeatTime  Time   `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime Time   `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// NodeAddress of a node.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// NodeDaemonEndpoints: where the agent listens.
type NodeDaemonEndpoints struct {
	KubeletEndpoint DaemonEndpoint `json:"kubeletEndpoint,omitempty"`
}

// DaemonEndpoint is a port.
type DaemonEndpoint struct {
	Port int32 `json:"Port"`
}

// NodeSystemInfo describes the node's software. The identity fields are
// always written, as Kubernetes writes them (the Python client refuses a
// node without them).
type NodeSystemInfo struct {
	MachineID               string `json:"machineID"`
	SystemUUID              string `json:"systemUUID"`
	BootID                  string `json:"bootID"`
	KubeProxyVersion        string `json:"kubeProxyVersion"` // deprecated; empty, as kubelets 1.31+ leave it
	KernelVersion           string `json:"kernelVersion,omitempty"`
	OSImage                 string `json:"osImage,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
	KubeletVersion          string `json:"kubeletVersion,omitempty"`
	OperatingSystem         string `json:"operatingSystem,omitempty"`
	Architecture            string `json:"architecture,omitempty"`
}

// ContainerImage present on a node.
type ContainerImage struct {
	Names     []string `json:"names"`
	SizeBytes int64    `json:"sizeBytes,omitempty"`
}

// Node condition types and well-known taints.
const (
	NodeReady           = "Ready"
	TaintUnreachable    = "node.kubernetes.io/unreachable"
	TaintNotReady       = "node.kubernetes.io/not-ready"
	TaintUnschedulable  = "node.kubernetes.io/unschedulable"
	TaintEffectNoSched  = "NoSchedule"
	TaintEffectPrefNo   = "PreferNoSchedule"
	TaintEffectNoExec   = "NoExecute"
	ResourceCPU         = "cpu"
	ResourceMemory      = "memory"
	ResourcePods        = "pods"
	ResourceNvidiaGPU   = "nvidia.com/gpu"
	LabelHostname       = "kubernetes.io/hostname"
	LabelTopologyZone   = "topology.kubernetes.io/zone"
	LabelOS             = "kubernetes.io/os"
	LabelArch           = "kubernetes.io/arch"
	LabelGPUProduct     = "nvidia.com/gpu.product"
	LabelSkiffSimulated = "skiff.dev/simulated"
	// AnnotationSimulatedProbeFailure, on a pod of a simulated node,
	// lists the probes ("startup", "liveness", "readiness", comma
	// separated) that fail: nothing listens in a simulated container, so
	// its HTTP, TCP and exec probes pass unless this fault says otherwise
	// (as KWOK simulates them). It may change while the pod runs.
	AnnotationSimulatedProbeFailure = "skiff.dev/simulated-probe-failure"
	// LabelSkiffPodNetwork is a node's pod network, set by its agent:
	// PodNetworkCNI (a network namespace and an IP per pod) or
	// PodNetworkNone (pods share the node's network, so every
	// containerPort is a port of the node: the scheduler's NodePorts
	// plugin counts it as a host port there).
	LabelSkiffPodNetwork = "skiff.dev/pod-network"
	PodNetworkCNI        = "cni"
	PodNetworkNone       = "none"
	// LabelSkiffDevicePlugin is a GPU node's device plugin, set by its
	// agent (--device-plugin): "builtin" (the agent runs skiff's) or
	// "external" (it runs none; a device plugin pod registers, and skiff's
	// DaemonSet selects these nodes).
	LabelSkiffDevicePlugin = "skiff.dev/device-plugin"
)

// LabelClassroom marks what `skiff classroom create ROOM` made (each
// student's namespace, ResourceQuota, LimitRange and RoleBinding) with
// the room's name, so that its status and delete find them and touch
// nothing else.
const LabelClassroom = "skiff.dev/classroom"

// Event records something that happened to an object, e.g. a pod
// FailedScheduling. Repeats bump Count instead of adding events.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Event struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// InvolvedObject the event is about.
	InvolvedObject ObjectReference `json:"involvedObject"`
	// Reason: short CamelCase, e.g. Scheduled, Pulling, FailedScheduling.
	Reason string `json:"reason,omitempty"`
	// Message for humans.
	Message string `json:"message,omitempty"`
	// Source component (and host) that reported it.
	Source EventSource `json:"source,omitempty"`
	// FirstTimestamp of the first occurrence.
	FirstTimestamp Time `json:"firstTimestamp,omitempty"`
	// LastTimestamp of the latest occurrence.
	LastTimestamp Time `json:"lastTimestamp,omitempty"`
	// Count of occurrences.
	Count int32 `json:"count,omitempty"`
	// Type: Normal or Warning.
	Type string `json:"type,omitempty"`
	// EventTime with microseconds, as events.k8s.io.
	EventTime MicroTime `json:"eventTime,omitempty"`
	// ReportingController, e.g. default-scheduler.
	ReportingController string `json:"reportingComponent,omitempty"`
	// ReportingInstance, e.g. the node name.
	ReportingInstance string `json:"reportingInstance,omitempty"`
}

// EventSource names the reporter.
type EventSource struct {
	Component string `json:"component,omitempty"`
	Host      string `json:"host,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)
