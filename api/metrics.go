package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Resource metrics (metrics.k8s.io/v1beta1), what `kubectl top` reads:
// the CPU and memory a node or a pod's containers use now. They are not
// stored: the API server asks the node agents each time
// (controlplane/apiserver/metrics_api.go), as metrics-server does, so
// they are not in Kinds.
//
// CPU is in cores ("250m", or nanocores "12345678n"): the rate of the
// cgroup's cumulative CPU time between two samples Window apart. Memory is
// the working set (usage minus inactive file pages), the figure the
// kubelet evicts and the OOM killer acts on.

// MetricsGroupVersion is the group/version of the resource metrics API.
const MetricsGroupVersion = "metrics.k8s.io/v1beta1"

// NodeMetrics is the resource usage of one node.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type NodeMetrics struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Timestamp of the newer of the two samples.
	Timestamp Time `json:"timestamp"`
	// Window between the two samples the CPU rate is computed over.
	Window metav1.Duration `json:"window"`
	// Usage: cpu and memory.
	Usage ResourceList `json:"usage"`
}

// NodeMetricsList is a list of NodeMetrics.
type NodeMetricsList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitempty"`
	Items    []NodeMetrics `json:"items"`
}

// PodMetrics is the resource usage of one pod's containers.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type PodMetrics struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Timestamp of the newer of the two samples.
	Timestamp Time `json:"timestamp"`
	// Window between the two samples.
	Window metav1.Duration `json:"window"`
	// Containers: the usage of each running container.
	Containers []ContainerMetrics `json:"containers"`
}

// PodMetricsList is a list of PodMetrics.
type PodMetricsList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitempty"`
	Items    []PodMetrics `json:"items"`
}

// ContainerMetrics is the usage of one container.
type ContainerMetrics struct {
	// Name of the container in the pod spec.
	Name string `json:"name"`
	// Usage: cpu and memory.
	Usage ResourceList `json:"usage"`
}
