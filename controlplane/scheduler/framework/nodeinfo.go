package framework

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"skiff.dev/skiff/api"
)

// DefaultMaxPods is the pod limit of a node that reports no "pods"
// allocatable: kubelet's default maxPods.
const DefaultMaxPods = 110

// Defaults used when scoring a container that requests nothing, so that
// BestEffort pods still spread instead of piling onto one node (Kubernetes
// uses the same numbers). Filtering never uses them: a pod that requests
// nothing always fits.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is an amount of every resource the scheduler counts: CPU in
// millicores, memory in bytes, a pod count, and extended resources such as
// nvidia.com/gpu (whole units) or ephemeral-storage (bytes) by name.
// Amounts come from api.ResourceAmount and add with api.AddAmounts: a sum
// stops at math.MaxInt64 instead of wrapping to a negative number (which
// would let every later pod through, or none).
type Resource struct {
	MilliCPU int64
	Memory   int64
	// Pods: how many pods (used for allocatable; requests leave it 0).
	Pods int64
	// Scalar holds every other resource by name; nil when there are none.
	Scalar map[string]int64
}

// NewResource converts a ResourceList.
func NewResource(rl api.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		switch name {
		case api.ResourceCPU:
			r.MilliCPU, _ = api.ResourceAmount(name, q)
		case api.ResourceMemory:
			r.Memory, _ = api.ResourceAmount(name, q)
		case api.ResourcePods:
			r.Pods, _ = api.ResourceAmount(name, q)
		default:
			v, _ := api.ResourceAmount(name, q)
			r.SetScalar(name, v)
		}
	}
	return r
}

// Get returns the amount of a resource by its API name.
func (r *Resource) Get(name string) int64 {
	switch name {
	case api.ResourceCPU:
		return r.MilliCPU
	case api.ResourceMemory:
		return r.Memory
	case api.ResourcePods:
		return r.Pods
	}
	return r.Scalar[name]
}

// SetScalar sets an extended resource.
func (r *Resource) SetScalar(name string, v int64) {
	if r.Scalar == nil {
		r.Scalar = map[string]int64{}
	}
	r.Scalar[name] = v
}

// Add adds o to r, saturating.
func (r *Resource) Add(o Resource) {
	r.MilliCPU = api.AddAmounts(r.MilliCPU, o.MilliCPU)
	r.Memory = api.AddAmounts(r.Memory, o.Memory)
	r.Pods = api.AddAmounts(r.Pods, o.Pods)
	for k, v := range o.Scalar {
		r.SetScalar(k, api.AddAmounts(r.Scalar[k], v))
	}
}

// Sub subtracts o from r, saturating. A saturated sum has lost what it
// held: Sub cannot undo Add then, and the caller recomputes (NodeInfo's
// RemovePod does).
func (r *Resource) Sub(o Resource) {
	r.MilliCPU = api.SubAmounts(r.MilliCPU, o.MilliCPU)
	r.Memory = api.SubAmounts(r.Memory, o.Memory)
	r.Pods = api.SubAmounts(r.Pods, o.Pods)
	for k, v := range o.Scalar {
		r.SetScalar(k, api.SubAmounts(r.Scalar[k], v))
	}
}

// saturated reports whether an amount of r reached an int64 bound.
func (r *Resource) saturated() bool {
	at := func(v int64) bool { return v == math.MaxInt64 || v == math.MinInt64 }
	if at(r.MilliCPU) || at(r.Memory) || at(r.Pods) {
		return true
	}
	for _, v := range r.Scalar {
		if at(v) {
			return true
		}
	}
	return false
}

// Clone returns a deep copy.
func (r Resource) Clone() Resource {
	if r.Scalar != nil {
		m := make(map[string]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			m[k] = v
		}
		r.Scalar = m
	}
	return r
}

// IsZero reports whether nothing is requested.
func (r *Resource) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.Pods != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// PodRequests returns what a pod asks the scheduler to reserve, per
// resource: the larger of the sum over its containers and the largest
// single init container (init containers run one at a time, before the
// others). A container's request for a resource defaults to its limit, as
// the API server's defaulting does; doing it here too keeps the scheduler
// right for objects that were never defaulted.
//
// nonZero is the same for CPU and memory only, with a container that asks
// for neither counted as DefaultMilliCPURequest / DefaultMemoryRequest; it
// is what scoring uses.
func PodRequests(pod *api.Pod) (req, nonZero Resource) {
	for i := range pod.Spec.Containers {
		c, nz := containerRequests(&pod.Spec.Containers[i])
		if i == 0 {
			// The first container's sums are the pod's so far: taken as
			// they are, its Scalar map too (containerRequests' own), not
			// added into a new one.
			req, nonZero = c, nz
			continue
		}
		req.Add(c)
		nonZero.Add(nz)
	}
	for i := range pod.Spec.InitContainers {
		c, nz := containerRequests(&pod.Spec.InitContainers[i])
		req.maxWith(c)
		nonZero.maxWith(nz)
	}
	return req, nonZero
}

func containerRequests(c *api.Container) (req, nonZero Resource) {
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			req.addQuantity(name, q)
		}
	}
	for name, q := range c.Resources.Requests {
		req.addQuantity(name, q)
	}
	nonZero.MilliCPU, nonZero.Memory = req.MilliCPU, req.Memory
	if _, ok := requestOrLimit(c, api.ResourceCPU); !ok {
		nonZero.MilliCPU = DefaultMilliCPURequest
	}
	if _, ok := requestOrLimit(c, api.ResourceMemory); !ok {
		nonZero.Memory = DefaultMemoryRequest
	}
	return req, nonZero
}

func requestOrLimit(c *api.Container, name string) (api.Quantity, bool) {
	if q, ok := c.Resources.Requests[name]; ok {
		return q, true
	}
	q, ok := c.Resources.Limits[name]
	return q, ok
}

func (r *Resource) addQuantity(name string, q api.Quantity) {
	v, _ := api.ResourceAmount(name, q) // out of range: saturated, never wrapped
	switch name {
	case api.ResourceCPU:
		r.MilliCPU = api.AddAmounts(r.MilliCPU, v)
	case api.ResourceMemory:
		r.Memory = api.AddAmounts(r.Memory, v)
	case api.ResourcePods:
		// A pod cannot request "pods"; each pod counts as one.
	default:
		r.SetScalar(name, api.AddAmounts(r.Scalar[name], v))
	}
}

// maxWith raises each resource of r to at least o's.
func (r *Resource) maxWith(o Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	for k, v := range o.Scalar {
		if v > r.Scalar[k] {
			r.SetScalar(k, v)
		}
	}
}

// HostPort is a port a pod takes on its node's network (protocol/port).
type HostPort struct {
	Protocol string
	Port     int32
}

// PodHostPorts lists the host ports a pod's containers ask for.
func PodHostPorts(pod *api.Pod) []HostPort {
	return podPorts(pod, func(p api.ContainerPort) int32 { return p.HostPort })
}

// PodContainerPorts lists the containerPorts a pod's containers declare:
// the ports they bind on the node when pods share the node's network.
func PodContainerPorts(pod *api.Pod) []HostPort {
	return podPorts(pod, func(p api.ContainerPort) int32 { return p.ContainerPort })
}

// podPorts lists, with its protocol (TCP when unset), the port that pick
// takes from each of the pod's containers' ports, where it is set.
func podPorts(pod *api.Pod, pick func(api.ContainerPort) int32) []HostPort {
	var out []HostPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			port := pick(p)
			if port <= 0 {
				continue
			}
			proto := strings.ToUpper(p.Protocol)
			if proto == "" {
				proto = "TCP"
			}
			out = append(out, HostPort{Protocol: proto, Port: port})
		}
	}
	return out
}

// PodPriority is the pod's priority: spec.priority, 0 when unset (skiff has
// no PriorityClass objects yet; the API server will fill spec.priority from
// priorityClassName once it does).
func PodPriority(pod *api.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// PodInfo is a pod with what the scheduler derives from it, computed once.
// Pod is shared with the informer's cache: never modify it.
type PodInfo struct {
	Pod      *api.Pod
	Key      string
	Requests Resource
	NonZero  Resource
	Ports    []HostPort
	Priority int32
	// WithAffinity: the pod has pod affinity or anti-affinity terms;
	// WithRequiredAntiAffinity: required anti-affinity ones (other pods
	// must keep out of its domain).
	WithAffinity, WithRequiredAntiAffinity bool
}

// NewPodInfo derives a PodInfo.
func NewPodInfo(pod *api.Pod) *PodInfo {
	req, nz := PodRequests(pod)
	return &PodInfo{
		Pod:          pod,
		Key:          api.Key(pod.Namespace, pod.Name),
		Requests:     req,
		NonZero:      nz,
		Ports:        PodHostPorts(pod),
		Priority:     PodPriority(pod),
		WithAffinity: pod.Spec.Affinity != nil && (pod.Spec.Affinity.PodAffinity != nil || pod.Spec.Affinity.PodAntiAffinity != nil),
		WithRequiredAntiAffinity: pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil &&
			len(pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0,
	}
}

// NodeInfo is one node as the scheduler sees it: the Node object, the pods
// placed on it (bound, and assumed: chosen by the scheduler but not yet
// confirmed by the API) and their sums. Filter and Score plugins read it;
// only the cache (and preemption's private copies) change it.
type NodeInfo struct {
	// Node is the informer's object: never modify it.
	Node *api.Node
	// Pods on the node, bound or assumed.
	Pods []*PodInfo
	// Allocatable is what pods may use (the node's status.allocatable).
	// SetNode replaces it whole and nothing changes it in place, so clones
	// share its Scalar map: read it, never write it.
	Allocatable Resource
	// Requested sums the pods' requests.
	Requested Resource
	// NonZeroRequested sums the pods' requests with defaults for empty
	// ones: scoring uses it.
	NonZeroRequested Resource
	// UsedPorts are the host ports taken by the pods; nil when none.
	UsedPorts map[HostPort]int
	// PodsWithAffinity and PodsWithRequiredAntiAffinity count the pods
	// with such terms (PodInfo.WithAffinity...): InterPodAffinity skips
	// nodes without any.
	PodsWithAffinity, PodsWithRequiredAntiAffinity int

	// facts: what the filters read from Node, computed once by SetNode
	// (nodefacts.go).
	facts nodeFacts
	// gpuAllocatable and gpuRequested are Allocatable's and Requested's
	// nvidia.com/gpu, kept beside the maps: a GPU pod's filter reads them
	// on every node it looks at, and a map lookup there is several cache
	// misses (AllocatableScalar, RequestedScalar).
	gpuAllocatable, gpuRequested int64
	// matches holds CountMatching's counts (matchcount.go); nil until the
	// first, and again after every change.
	matches atomic.Pointer[matchMemo]
}

// AllocatableScalar is Allocatable.Scalar[name].
func (n *NodeInfo) AllocatableScalar(name string) int64 {
	if name == api.ResourceNvidiaGPU && n.facts.ok {
		return n.gpuAllocatable
	}
	return n.Allocatable.Scalar[name]
}

// RequestedScalar is Requested.Scalar[name].
func (n *NodeInfo) RequestedScalar(name string) int64 {
	if name == api.ResourceNvidiaGPU && n.facts.ok {
		return n.gpuRequested
	}
	return n.Requested.Scalar[name]
}

// NewNodeInfo returns the NodeInfo of a node with no pods.
func NewNodeInfo(node *api.Node) *NodeInfo {
	n := &NodeInfo{}
	n.SetNode(node)
	return n
}

// Name is the node's name ("" while only pods are known).
func (n *NodeInfo) Name() string {
	if n.facts.ok {
		return n.facts.name // without reading the Node (nodefacts.go)
	}
	if n.Node == nil {
		return ""
	}
	return n.Node.Name
}

// SetNode sets (or replaces) the Node object and its allocatable.
func (n *NodeInfo) SetNode(node *api.Node) {
	n.matches.Store(nil)
	n.Node = node
	n.facts = factsOf(node)
	if node == nil {
		n.Allocatable = Resource{}
		return
	}
	n.Allocatable = NewResource(node.Status.Allocatable)
	if _, ok := node.Status.Allocatable[api.ResourcePods]; !ok {
		n.Allocatable.Pods = DefaultMaxPods
	}
	n.gpuAllocatable = n.Allocatable.Scalar[api.ResourceNvidiaGPU]
	n.gpuRequested = n.Requested.Scalar[api.ResourceNvidiaGPU]
}

// Clone returns a copy that can be changed without touching n. PodInfos
// are shared: they are never changed; so is Allocatable's Scalar map (a
// pod's add or removal changes only the sums of requests).
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		Node:             n.Node,
		Pods:             slices.Clone(n.Pods),
		Allocatable:      n.Allocatable,
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),

		PodsWithAffinity:             n.PodsWithAffinity,
		PodsWithRequiredAntiAffinity: n.PodsWithRequiredAntiAffinity,
		facts:                        n.facts,
		gpuAllocatable:               n.gpuAllocatable,
		gpuRequested:                 n.gpuRequested,
	}
	if n.UsedPorts != nil {
		c.UsedPorts = make(map[HostPort]int, len(n.UsedPorts))
		for k, v := range n.UsedPorts {
			c.UsedPorts[k] = v
		}
	}
	return c
}

// AddPod counts a pod on the node.
func (n *NodeInfo) AddPod(p *PodInfo) {
	n.matches.Store(nil)
	n.Pods = append(n.Pods, p)
	n.countAffinity(p, 1)
	n.Requested.Add(p.Requests)
	n.NonZeroRequested.Add(p.NonZero)
	n.gpuRequested = n.Requested.Scalar[api.ResourceNvidiaGPU]
	for _, hp := range p.Ports {
		if n.UsedPorts == nil {
			n.UsedPorts = map[HostPort]int{}
		}
		n.UsedPorts[hp]++
	}
}

func (n *NodeInfo) countAffinity(p *PodInfo, d int) {
	if p.WithAffinity {
		n.PodsWithAffinity += d
	}
	if p.WithRequiredAntiAffinity {
		n.PodsWithRequiredAntiAffinity += d
	}
}

// RemovePod removes the pod with key from the node; false if absent.
func (n *NodeInfo) RemovePod(key string) bool {
	i := slices.IndexFunc(n.Pods, func(p *PodInfo) bool { return p.Key == key })
	if i < 0 {
		return false
	}
	p := n.Pods[i]
	n.matches.Store(nil)
	n.Pods = slices.Delete(n.Pods, i, i+1)
	n.countAffinity(p, -1)
	if n.Requested.saturated() || n.NonZeroRequested.saturated() {
		// The sums stopped at a bound: subtracting would undercount.
		n.Requested, n.NonZeroRequested = Resource{}, Resource{}
		for _, q := range n.Pods {
			n.Requested.Add(q.Requests)
			n.NonZeroRequested.Add(q.NonZero)
		}
	} else {
		n.Requested.Sub(p.Requests)
		n.NonZeroRequested.Sub(p.NonZero)
	}
	n.gpuRequested = n.Requested.Scalar[api.ResourceNvidiaGPU]
	for _, hp := range p.Ports {
		if n.UsedPorts[hp]--; n.UsedPorts[hp] <= 0 {
			delete(n.UsedPorts, hp)
		}
	}
	return true
}
