package plugins

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// GPUDriverName is the DRA driver whose devices are the GPUs the device
// plugin hands out as nvidia.com/gpu (NVIDIA's name; agent/dra/gpudriver).
const GPUDriverName = "gpu.nvidia.com"

// ClaimedGPUs is one GPU inventory per node, scheduler side: how many GPUs
// of driver gpu.nvidia.com ResourceClaims hold on each node, so that
// NodeResourcesFit does not place an nvidia.com/gpu pod on a GPU a claim
// has taken. DynamicResources keeps it (the claims' status.allocation, and
// the allocations it reserved but has not written yet); NodeResourcesFit
// reads it.
//
// The node's own count is not enough on its own: the agent lowers its
// nvidia.com/gpu allocatable by the GPUs claims hold in its pool
// (allocatable = healthy − allocated or prepared, from its claims informer,
// within a second of an allocation), but between the scheduler's Reserve
// and the node's next status the allocatable the scheduler reads still
// counts them. Subtracting the claims from allocatable would count twice
// the ones the node already left out, so the nvidia.com/gpu the pods of a
// node may still be given is
//
//	min(allocatable, capacity − claimed)
//
// which is healthy − claimed whenever no GPU of the node is unhealthy,
// whether the node has caught up or not; with unhealthy GPUs it can
// overcount by at most their number until it has (the node still refuses
// a GPU held twice: the pod fails admission).
//
// A claim's GPUs are counted on the node of its allocation's nodeSelector
// (the allocator writes matchFields metadata.name In [NODE] for a node's
// own slice), or else on the node its pool is named after (NVIDIA's pool
// name); a claim shared by several pods counts once.
//
// It also orders the node's two ways to a GPU (WaitWrites): the agent's
// device manager picks the lowest GPU no claim it can see holds, so an
// nvidia.com/gpu pod bound to a node while a claim allocation there is
// reserved but not yet written (its PreBind in flight) could be given the
// claim's GPU, and the claim's pod would wait for it forever. Such a pod
// is bound only after those writes finished (DynamicResources.PreBind),
// and the agent reads the claims afresh before it records a pick (agent/
// dra/gpudriver Driver.Withdraw), so it sees them. (An allocation made
// later, from a slice that still listed the GPU the agent is picking, is
// taken back by recheckSlices: the fast path here, that one the guarantee.)
type ClaimedGPUs struct {
	mu        sync.Mutex
	allocated map[string]nodeGPUs // by claim UID: from the informer
	assumed   map[string]nodeGPUs // by claim UID: reserved, not written yet
	byNode    map[string]int64
	// nodes is len(byNode), read without the lock: with no claim holding
	// GPUs anywhere (device-plugin GPUs only) OnNode, asked once per node
	// and pod, takes no lock.
	nodes atomic.Int64
	// writing: by claim UID, the node of an allocation Reserve made whose
	// PreBind has not finished writing it (beginWrite, endWrite).
	writing map[string]string
	// written is closed and replaced when an entry leaves writing.
	written chan struct{}
	// onWait, when set (tests), is called each time WaitWrites blocks.
	onWait func()
}

type nodeGPUs struct {
	node string
	n    int64
}

// NewClaimedGPUs returns an empty count.
func NewClaimedGPUs() *ClaimedGPUs {
	return &ClaimedGPUs{allocated: map[string]nodeGPUs{}, assumed: map[string]nodeGPUs{}, byNode: map[string]int64{},
		writing: map[string]string{}, written: make(chan struct{})}
}

// beginWrite records that claim uid's allocation (Reserve's) is to be
// written by a PreBind; only GPUs of gpu.nvidia.com count.
func (c *ClaimedGPUs) beginWrite(uid string, a *api.AllocationResult) {
	if c == nil {
		return
	}
	g := apiAllocationGPUs(a)
	if g.n == 0 || g.node == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing[uid] = g.node
}

// endWrite records that the write of claim uid's allocation finished
// (written, failed, or given up in Unreserve); a no-op when none is recorded.
func (c *ClaimedGPUs) endWrite(uid string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.writing[uid]; !ok {
		return
	}
	delete(c.writing, uid)
	close(c.written)
	c.written = make(chan struct{})
}

// WaitWrites returns once no claim allocation on node is reserved but not
// yet written, except those own reports (the waiting pod's own claims,
// which its own PreBind writes), or ctx's error when it ends first. No
// polling: it wakes when a write finishes.
func (c *ClaimedGPUs) WaitWrites(ctx context.Context, node string, own func(uid string) bool) error {
	if c == nil {
		return nil
	}
	for {
		c.mu.Lock()
		pending := false
		for uid, n := range c.writing {
			if n == node && (own == nil || !own(uid)) {
				pending = true
				break
			}
		}
		ch, hook := c.written, c.onWait
		c.mu.Unlock()
		if !pending {
			return nil
		}
		if hook != nil {
			hook()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// UsesDevicePluginGPUs reports whether a container of pod asks for one of
// NVIDIA's device plugin resources (nvidia.com/gpu, nvidia.com/mig-…):
// GPUs of the one inventory that claims of gpu.nvidia.com also draw from.
func UsesDevicePluginGPUs(pod *api.Pod) bool {
	uses := func(cs []api.Container) bool {
		for _, ct := range cs {
			for _, l := range []api.ResourceList{ct.Resources.Limits, ct.Resources.Requests} {
				for name := range l {
					if strings.HasPrefix(name, "nvidia.com/") {
						return true
					}
				}
			}
		}
		return false
	}
	return uses(pod.Spec.Containers) || uses(pod.Spec.InitContainers)
}

// OnNode returns the GPUs claims hold on node.
func (c *ClaimedGPUs) OnNode(node string) int64 {
	if c == nil {
		return 0
	}
	if c.nodes.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byNode[node]
}

// Allocatable is the nvidia.com/gpu the pods of ni may still be given:
// min(allocatable, capacity − claimed); see the type's doc.
func (c *ClaimedGPUs) Allocatable(ni *framework.NodeInfo) int64 {
	return c.allocatableFrom(ni, ni.AllocatableScalar(api.ResourceNvidiaGPU))
}

// allocatableFrom is Allocatable for a caller that has read alloc, the
// node's allocatable nvidia.com/gpu, already.
func (c *ClaimedGPUs) allocatableFrom(ni *framework.NodeInfo, alloc int64) int64 {
	if c == nil || ni.Node == nil {
		return alloc
	}
	claimed := c.OnNode(ni.Name())
	if claimed == 0 {
		return alloc
	}
	claimed = api.MulAmounts(claimed, replicasPerGPU(ni.Node))
	capacity := alloc
	if q, ok := ni.Node.Status.Capacity[api.ResourceNvidiaGPU]; ok {
		capacity, _ = api.ResourceAmount(api.ResourceNvidiaGPU, q)
	}
	return max(0, min(alloc, api.SubAmounts(capacity, claimed)))
}

// replicasPerGPU is how many nvidia.com/gpu one GPU is on a node whose
// device plugin shares GPUs (time-slicing or MPS): its GPU feature
// discovery label nvidia.com/gpu.replicas. A claim takes a GPU whole, so
// it takes that many of them. 1 without sharing.
func replicasPerGPU(n *api.Node) int64 {
	switch n.Labels[api.LabelGPUSharingStrategy] {
	case "time-slicing", "mps":
	default:
		return 1
	}
	r, err := strconv.ParseInt(n.Labels[api.LabelGPUReplicas], 10, 64)
	if err != nil || r < 1 {
		return 1
	}
	return r
}

// effective is what claim uid counts: its written allocation, else the
// one reserved for it. c.mu is held.
func (c *ClaimedGPUs) effective(uid string) nodeGPUs {
	if g, ok := c.allocated[uid]; ok {
		return g
	}
	return c.assumed[uid]
}

// change applies edit to the claim's entries and keeps byNode in step.
func (c *ClaimedGPUs) change(uid string, edit func()) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.effective(uid)
	edit()
	cur := c.effective(uid)
	if old == cur {
		return
	}
	if old.n != 0 {
		if c.byNode[old.node] -= old.n; c.byNode[old.node] <= 0 {
			delete(c.byNode, old.node)
		}
	}
	if cur.n != 0 {
		c.byNode[cur.node] += cur.n
	}
	c.nodes.Store(int64(len(c.byNode)))
}

// setAllocated records a claim's written allocation (nil: none); it
// replaces what was reserved for it.
func (c *ClaimedGPUs) setAllocated(uid string, a *api.AllocationResult) {
	c.change(uid, func() {
		delete(c.assumed, uid)
		if g := apiAllocationGPUs(a); g.n > 0 {
			c.allocated[uid] = g
		} else {
			delete(c.allocated, uid)
		}
	})
}

// setAssumed records the allocation Reserve made for a claim (nil: forget it).
func (c *ClaimedGPUs) setAssumed(uid string, a *api.AllocationResult) {
	c.change(uid, func() {
		if g := apiAllocationGPUs(a); g.n > 0 {
			c.assumed[uid] = g
		} else {
			delete(c.assumed, uid)
		}
	})
}

// forget drops a deleted claim.
func (c *ClaimedGPUs) forget(uid string) {
	c.change(uid, func() {
		delete(c.allocated, uid)
		delete(c.assumed, uid)
	})
}

func apiAllocationGPUs(a *api.AllocationResult) nodeGPUs {
	if a == nil {
		return nodeGPUs{}
	}
	var g nodeGPUs
	for _, r := range a.Devices.Results {
		if r.Driver == GPUDriverName {
			g.n++
			if g.node == "" {
				g.node = r.Pool
			}
		}
	}
	if a.NodeSelector != nil {
		for _, t := range a.NodeSelector.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == "metadata.name" && f.Operator == "In" && len(f.Values) == 1 {
					g.node = f.Values[0]
				}
			}
		}
	}
	return g
}
