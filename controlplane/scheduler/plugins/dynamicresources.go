package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// DynamicResources allocates the devices of a pod's ResourceClaims while
// the scheduler picks its node (structured parameters, Kubernetes'
// dynamicresources plugin):
//
//	PreEnqueue  the pod waits until every claim it names exists
//	            (`pod "NS/P": ResourceClaim not created yet` while the
//	            resourceclaim controller has not made its template claims)
//	PreFilter   gather the claims; a request naming a missing DeviceClass
//	            fails the pod on every node
//	Filter      per node: an allocated claim must be usable there
//	            (its allocation's nodeSelector); the others are allocated
//	            by Kubernetes' structured allocator
//	            (k8s.io/dynamic-resource-allocation/structured) over the
//	            ResourceSlices the node can use, excluding the devices
//	            other claims hold ("cannot allocate all claims")
//	Reserve     remember the chosen node's allocation, so the next cycles
//	            do not hand out the same devices before it is written
//	Unreserve   forget it
//	PreBind     write it: the delete-protection finalizer, then
//	            status.allocation and the pod in status.reservedFor;
//	            then read the node's slices again and take back an
//	            allocation whose device left them meanwhile (the node
//	            hands it out through the device plugin; recheckSlices)
//
// Devices that the device plugin handed out through nvidia.com/gpu are not
// in the node's slice (the gpu.nvidia.com driver leaves them out), so the
// allocator never sees them. The other way round, the GPUs of driver
// gpu.nvidia.com that claims hold (allocated, or reserved in a cycle and
// not written yet) are counted per node in ClaimedGPUs, which
// NodeResourcesFit subtracts from nvidia.com/gpu: a device-plugin pod is
// not placed on a node whose GPUs claims took before the node has prepared
// them (and lowered its allocatable).
//
// Beyond Kubernetes, which says only "cannot allocate all claims", a
// rejected node's status carries details (Status.Details, shown by
// `describe pod` and `trace pod`): which request failed, which selector or
// constraint ruled out which devices, and the closest candidates.
type DynamicResources struct {
	client   client.Interface
	log      *slog.Logger
	celCache *cel.Cache
	features structured.Features

	claims, classes, slices *client.Informer
	informers               *client.InformerFactory // whose informers those are
	ownsInfs                bool                    // made by NewDynamicResources: Run runs and waits for it
	registered              chan struct{}           // closed once Run's handlers are on the informers

	mu sync.RWMutex
	// converted: the k8s.io/api form of classes and slices, by name.
	classesK8s map[string]*resourcev1.DeviceClass
	slicesK8s  map[string]*resourcev1.ResourceSlice
	// byNode: the slices of each node ("" for slices not of one node),
	// with their devices' IDs and class results (dynamicresources_fast.go);
	// each entry is replaced, never changed in place.
	byNode map[string]*nodeDevices
	// allocated: the devices each allocated claim holds, by claim UID.
	allocated map[string][]structured.DeviceID
	// assumed: allocations made in Reserve, not yet seen in the informer.
	assumed map[string]*resourcev1.AllocationResult
	// inUse counts, per device, the claims of allocated and assumed that
	// hold it (setAllocatedLocked, setAssumedLocked).
	inUse map[structured.DeviceID]int
	// gpus: the GPUs claims hold per node, for NodeResourcesFit; nil: not kept.
	gpus *ClaimedGPUs
	// filterTimeout bounds the allocator's search on one node
	// (DynamicResourcesArgs.filterTimeout); 0: no bound.
	filterTimeout time.Duration
	// sink receives the informers' changes (SetEventSink); nil: moved.
	sink framework.EventSink
}

var (
	_ framework.PreEnqueuePlugin  = (*DynamicResources)(nil)
	_ framework.PreFilterPlugin   = (*DynamicResources)(nil)
	_ framework.FilterPlugin      = (*DynamicResources)(nil)
	_ framework.ReservePlugin     = (*DynamicResources)(nil)
	_ framework.PreBindPlugin     = (*DynamicResources)(nil)
	_ framework.EventSourcePlugin = (*DynamicResources)(nil)
	_ framework.EventEmitter      = (*DynamicResources)(nil)
	_ framework.EnqueueExtensions = (*DynamicResources)(nil)
)

// Kubernetes' words.
const (
	ReasonCannotAllocate      = "cannot allocate all claims"
	ReasonAllocationTimedOut  = "timed out trying to allocate devices"
	ReasonClaimNotOnNode      = "resourceclaim not available on the node"
	ReasonClaimInUse          = "resourceclaim in use"
	ReasonClaimNotCreated     = "ResourceClaim not created yet"
	dynamicResourcesStateKey  = framework.StateKey("PreFilter" + DynamicResourcesName)
	maxExplainedDevices       = 8
	maxClosestCandidates      = 3
	dynamicResourcesCacheSize = 1024
)

// NewDynamicResources makes the plugin with informers of its own on c;
// Run starts them.
func NewDynamicResources(c client.Interface, log *slog.Logger) *DynamicResources {
	return NewDynamicResourcesShared(c, nil, log)
}

// NewDynamicResourcesShared makes the plugin reading claims, classes and
// slices from the informers of f (the scheduler's, or the process's
// shared factory; its client must be c); nil f: informers of its own.
func NewDynamicResourcesShared(c client.Interface, f *client.InformerFactory, log *slog.Logger) *DynamicResources {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, owns := informersOf(c, f, log)
	pl := &DynamicResources{
		client:   c,
		log:      log.With("plugin", DynamicResourcesName),
		celCache: cel.NewCache(dynamicResourcesCacheSize, cel.Features{}),
		// ConsumableCapacity brings distinctAttribute (KEP-5075); it picks
		// the library's "incubating" allocator, as kube-scheduler does
		// when that gate is on.
		features:   structured.Features{PrioritizedList: true, DeviceTaints: true, ConsumableCapacity: true, PartitionableDevices: true},
		classesK8s: map[string]*resourcev1.DeviceClass{},
		slicesK8s:  map[string]*resourcev1.ResourceSlice{},
		byNode:     map[string]*nodeDevices{},
		allocated:  map[string][]structured.DeviceID{},
		assumed:    map[string]*resourcev1.AllocationResult{},
		inUse:      map[structured.DeviceID]int{},
	}
	pl.informers, pl.ownsInfs, pl.registered = f, owns, make(chan struct{})
	pl.claims = f.InformerFor(&api.ResourceClaim{})
	pl.classes = f.InformerFor(&api.DeviceClass{})
	pl.slices = f.InformerFor(&api.ResourceSlice{})
	return pl
}

// Name implements framework.Plugin.
func (*DynamicResources) Name() string { return DynamicResourcesName }

// Run implements framework.EventSourcePlugin: handlers on the three
// informers until ctx ends (starting them when they are the plugin's
// own); a change may let a waiting pod fit (a claim created or
// deallocated, a slice published, a class added). With an event sink
// (SetEventSink) each change is reported as what it is, for the queueing
// hints; else moved.
func (pl *DynamicResources) Run(ctx context.Context, moved func()) {
	emit := func(r framework.EventResource, a framework.ActionType, o, n any) {
		if pl.sink != nil {
			pl.sink(framework.ClusterEvent{Resource: r, ActionType: a}, o, n)
			return
		}
		moved()
	}
	regs := [3]client.Registration{}
	regs[0] = pl.claims.AddHandler(client.Handler{
		OnAdd: func(o api.Object) {
			pl.claimChanged(o.(*api.ResourceClaim), false)
			emit(framework.ResourceClaim, framework.Add, nil, o)
		},
		OnUpdate: func(old, o api.Object) {
			pl.claimChanged(o.(*api.ResourceClaim), false)
			emit(framework.ResourceClaim, framework.UpdateOther, old, o)
		},
		OnDelete: func(o api.Object) {
			pl.claimChanged(o.(*api.ResourceClaim), true)
			emit(framework.ResourceClaim, framework.Delete, o, nil)
		},
	})
	regs[1] = pl.classes.AddHandler(client.Handler{
		OnAdd: func(o api.Object) {
			pl.classChanged(o.(*api.DeviceClass), false)
			emit(framework.DeviceClass, framework.Add, nil, o)
		},
		OnUpdate: func(old, o api.Object) {
			pl.classChanged(o.(*api.DeviceClass), false)
			emit(framework.DeviceClass, framework.UpdateOther, old, o)
		},
		OnDelete: func(o api.Object) { pl.classChanged(o.(*api.DeviceClass), true) },
	})
	regs[2] = pl.slices.AddHandler(client.Handler{
		OnAdd: func(o api.Object) {
			pl.sliceChanged(o.(*api.ResourceSlice), false)
			emit(framework.ResourceSlice, framework.Add, nil, o)
		},
		OnUpdate: func(old, o api.Object) {
			pl.sliceChanged(o.(*api.ResourceSlice), false)
			emit(framework.ResourceSlice, framework.UpdateOther, old, o)
		},
		OnDelete: func(o api.Object) {
			pl.sliceChanged(o.(*api.ResourceSlice), true)
			emit(framework.ResourceSlice, framework.Delete, o, nil)
		},
	})
	close(pl.registered)
	pl.informers.Start(ctx) // a no-op when the scheduler started them
	<-ctx.Done()
	for i, inf := range []*client.Informer{pl.claims, pl.classes, pl.slices} {
		inf.RemoveHandler(regs[i])
	}
	if pl.ownsInfs {
		pl.informers.Wait()
	}
}

// WaitForSync implements framework.EventSourcePlugin.
// A shared informer may have synced long before Run added the plugin's
// handlers, so it also waits for those (they are told every cached object
// as they are added).
func (pl *DynamicResources) WaitForSync(ctx context.Context) bool {
	select {
	case <-pl.registered:
	case <-ctx.Done():
		return false
	}
	return pl.claims.WaitForSync(ctx) && pl.classes.WaitForSync(ctx) && pl.slices.WaitForSync(ctx)
}

func (pl *DynamicResources) claimChanged(c *api.ResourceClaim, deleted bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if deleted || c.Status.Allocation == nil {
		pl.setAllocatedLocked(c.UID, nil)
		if deleted {
			pl.setAssumedLocked(c.UID, nil)
			pl.gpus.forget(c.UID)
		} else {
			pl.gpus.setAllocated(c.UID, nil)
			if a, ok := pl.assumed[c.UID]; ok { // reserved, PreBind not seen yet
				pl.setAssumedGPUs(c.UID, a)
			}
		}
		return
	}
	ids := make([]structured.DeviceID, 0, len(c.Status.Allocation.Devices.Results))
	for _, r := range c.Status.Allocation.Devices.Results {
		ids = append(ids, structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
	}
	pl.setAllocatedLocked(c.UID, ids)
	pl.setAssumedLocked(c.UID, nil) // the informer has caught up with PreBind
	pl.gpus.setAllocated(c.UID, c.Status.Allocation)
}

// setAssumedGPUs counts an allocation Reserve made in ClaimedGPUs.
func (pl *DynamicResources) setAssumedGPUs(uid string, a *resourcev1.AllocationResult) {
	if pl.gpus == nil {
		return
	}
	conv, err := fromKubernetes[api.AllocationResult](a)
	if err != nil {
		pl.log.Error("convert AllocationResult", "claim", uid, "err", err)
		return
	}
	pl.gpus.setAssumed(uid, conv)
}

// beginWrite records in ClaimedGPUs that Reserve's allocation for a claim
// is to be written (PreBind), so nvidia.com/gpu pods of its node wait.
func (pl *DynamicResources) beginWrite(uid string, a *resourcev1.AllocationResult) {
	if pl.gpus == nil {
		return
	}
	conv, err := fromKubernetes[api.AllocationResult](a)
	if err != nil {
		pl.log.Error("convert AllocationResult", "claim", uid, "err", err)
		return
	}
	pl.gpus.beginWrite(uid, conv)
}

func (pl *DynamicResources) classChanged(c *api.DeviceClass, deleted bool) {
	var k *resourcev1.DeviceClass
	if !deleted {
		var err error
		if k, err = api.ToKubernetesResource[resourcev1.DeviceClass](c); err != nil {
			pl.log.Error("convert DeviceClass", "class", c.Name, "err", err)
			return
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if deleted {
		delete(pl.classesK8s, c.Name)
	} else {
		pl.classesK8s[c.Name] = k
	}
}

func (pl *DynamicResources) sliceChanged(s *api.ResourceSlice, deleted bool) {
	var k *resourcev1.ResourceSlice
	if !deleted {
		var err error
		if k, err = api.ToKubernetesResource[resourcev1.ResourceSlice](s); err != nil {
			pl.log.Error("convert ResourceSlice", "slice", s.Name, "err", err)
			return
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.indexSlice(s.Name, k)
	if deleted {
		delete(pl.slicesK8s, s.Name)
	} else {
		pl.slicesK8s[s.Name] = k
	}
}

// PreEnqueue implements framework.PreEnqueuePlugin: every claim the pod
// names must exist (and, for template claims, have been made for it).
func (pl *DynamicResources) PreEnqueue(_ context.Context, pod *api.Pod) *framework.Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	if _, err := pl.podClaims(pod); err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	return nil
}

// podClaims returns the pod's claims, in spec order, from the informer,
// or the error Kubernetes' foreachPodResourceClaim returns.
func (pl *DynamicResources) podClaims(pod *api.Pod) ([]*api.ResourceClaim, error) {
	out := make([]*api.ResourceClaim, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, ok := api.ClaimName(pod, pc)
		if !ok {
			return nil, fmt.Errorf("pod %q: %s", api.Key(pod.Namespace, pod.Name), ReasonClaimNotCreated)
		}
		o, found := pl.claims.Get(pod.Namespace, name)
		if !found {
			return nil, api.NewNotFound(pl.claims.Kind(), name)
		}
		c := o.(*api.ResourceClaim)
		if c.DeletionTimestamp != nil {
			return nil, fmt.Errorf("resourceclaim %q is being deleted", c.Name)
		}
		if pc.ResourceClaimTemplateName != nil && !api.IsControlledBy(c, pod.UID) {
			return nil, fmt.Errorf("ResourceClaim %s was not created for pod %s (pod is not owner)", api.Key(c.Namespace, c.Name), api.Key(pod.Namespace, pod.Name))
		}
		out = append(out, c)
	}
	return out, nil
}

// draState is what PreFilter found, for Filter, Reserve and PreBind.
type draState struct {
	claims []*api.ResourceClaim
	// toAllocate: the claims (k8s.io/api form) still without an
	// allocation, and their index in claims.
	toAllocate      []*resourcev1.ResourceClaim
	toAllocateIndex []int
	// perNode: the allocation found on each node by Filter.
	mu      sync.Mutex
	perNode map[string][]resourcev1.AllocationResult
	// chosen: what Reserve took.
	chosen []resourcev1.AllocationResult
	// unwritten: the claims (as the informer has them, by index in
	// claims) whose allocation in claims is another pod's assumed one,
	// not written yet; PreBind writes it unless that pod did first.
	unwritten map[int]*api.ResourceClaim
	// counted: the nodes Filter found room on by counting (their
	// allocation is made in Reserve).
	counted map[string]*api.Node
	// classes the claims to allocate ask for; simpleClassObj (its cache
	// key simpleKey) and simpleCount: when every request is "exactly N of
	// one class" (simpleDemand).
	classes        []string
	simpleClassObj *resourcev1.DeviceClass
	simpleKey      string
	simpleCount    int64
}

// Clone implements framework.StateData: preemption's what-if runs may
// share it (the allocation does not depend on the pods evicted).
func (s *draState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin.
func (pl *DynamicResources) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return framework.NewStatus(framework.Skip) // as Kubernetes': no Filter per node
	}
	claims, err := pl.podClaims(pod)
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	s := &draState{claims: claims, perNode: map[string][]resourcev1.AllocationResult{}, counted: map[string]*api.Node{}}
	for i, c := range claims {
		if c.Status.Allocation == nil {
			// Another pod's cycle reserved an allocation of this claim
			// (one claim, several pods) that is not written yet: use it,
			// as Kubernetes' assume cache does, rather than allocate the
			// claim a second time (whose PreBind would then fail).
			a, err := pl.assumedAllocation(c.UID)
			if err != nil {
				return framework.AsStatus(err)
			}
			if a != nil {
				if s.unwritten == nil {
					s.unwritten = map[int]*api.ResourceClaim{}
				}
				s.unwritten[i] = c
				cp := *c
				cp.Status.Allocation = a
				c, claims[i] = &cp, &cp
			}
		}
		if c.Status.Allocation != nil {
			if !c.IsReservedFor(pod.UID) && len(c.Status.ReservedFor) >= api.ResourceClaimReservedForMaxSize {
				return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("resourceclaim %s: %s", c.Name, ReasonClaimInUse))
			}
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			for _, class := range requestClasses(r) {
				if _, ok := pl.classes.Get("", class); !ok {
					return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("request %s: device class %s does not exist", r.Name, class))
				}
			}
		}
		k, err := api.ToKubernetesResource[resourcev1.ResourceClaim](c)
		if err != nil {
			return framework.AsStatus(err)
		}
		s.toAllocate = append(s.toAllocate, k)
		s.toAllocateIndex = append(s.toAllocateIndex, i)
	}
	if len(s.toAllocate) > 0 {
		for _, c := range s.claims {
			for _, r := range c.Spec.Devices.Requests {
				for _, class := range requestClasses(r) {
					if !slices.Contains(s.classes, class) {
						s.classes = append(s.classes, class)
					}
				}
			}
		}
		if class, n, ok := simpleDemand(s.toAllocate); ok {
			if c, err := pl.Get(class); err == nil {
				s.simpleClassObj, s.simpleKey, s.simpleCount = c, classKey(c), n
			}
		}
	}
	state.Write(dynamicResourcesStateKey, s)
	return nil
}

func requestClasses(r api.DeviceRequest) []string {
	if r.Exactly != nil {
		return []string{r.Exactly.DeviceClassName}
	}
	out := make([]string, 0, len(r.FirstAvailable))
	for _, s := range r.FirstAvailable {
		out = append(out, s.DeviceClassName)
	}
	return out
}

// assumedAllocation is the allocation a Reserve made for the claim and
// the informer does not show yet, in skiff's form; nil when none.
func (pl *DynamicResources) assumedAllocation(uid string) (*api.AllocationResult, error) {
	pl.mu.RLock()
	a, ok := pl.assumed[uid]
	pl.mu.RUnlock()
	if !ok || a == nil {
		return nil, nil
	}
	return fromKubernetes[api.AllocationResult](a)
}

// sameDevices reports whether two allocations hand out the same devices
// for the same requests.
func sameDevices(a, b *api.AllocationResult) bool {
	return a != nil && b != nil && slices.EqualFunc(a.Devices.Results, b.Devices.Results, func(x, y api.DeviceRequestAllocationResult) bool {
		return x.Request == y.Request && x.Driver == y.Driver && x.Pool == y.Pool && x.Device == y.Device
	})
}

// setAllocatedLocked records the devices an allocated claim holds (nil:
// none), keeping inUse. pl.mu is held.
func (pl *DynamicResources) setAllocatedLocked(uid string, ids []structured.DeviceID) {
	for _, id := range pl.allocated[uid] {
		pl.release(id)
	}
	if ids == nil {
		delete(pl.allocated, uid)
		return
	}
	pl.allocated[uid] = ids
	for _, id := range ids {
		pl.inUse[id]++
	}
}

// setAssumedLocked records an allocation Reserve made and the informer
// has not shown yet (nil: none), keeping inUse. pl.mu is held.
func (pl *DynamicResources) setAssumedLocked(uid string, a *resourcev1.AllocationResult) {
	if old, ok := pl.assumed[uid]; ok {
		for _, r := range old.Devices.Results {
			pl.release(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	if a == nil {
		delete(pl.assumed, uid)
		return
	}
	pl.assumed[uid] = a
	for _, r := range a.Devices.Results {
		pl.inUse[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]++
	}
}

func (pl *DynamicResources) release(id structured.DeviceID) {
	if pl.inUse[id]--; pl.inUse[id] <= 0 {
		delete(pl.inUse, id)
	}
}

// allocatedOn is the allocator's view of which of the given devices are
// taken (by an allocated claim, or by an allocation Reserve made): the
// allocator only looks at one node's devices, so only theirs are listed.
func (pl *DynamicResources) allocatedOn(nds ...*nodeDevices) structured.AllocatedState {
	ids := sets.New[structured.DeviceID]()
	pl.mu.RLock()
	for _, nd := range nds {
		if nd == nil {
			continue
		}
		for _, id := range nd.ids {
			if pl.inUse[id] > 0 {
				ids.Insert(id)
			}
		}
	}
	pl.mu.RUnlock()
	return structured.AllocatedState{AllocatedDevices: ids, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
}

// slicesFor returns the slices node can use: its own and those without a
// nodeName (nodeSelector, allNodes), which the allocator matches.
func (pl *DynamicResources) slicesFor(node string) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for _, nd := range []*nodeDevices{pl.devicesOf(node), pl.devicesOf("")} {
		if nd != nil {
			out = append(out, nd.slices...)
		}
	}
	return out
}

// devicesOf returns what the plugin keeps of a node's slices ("": the
// slices not of one node), nil when there are none.
func (pl *DynamicResources) devicesOf(node string) *nodeDevices {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return pl.byNode[node]
}

// sliceNode is the node a slice belongs to, "" for nodeSelector/allNodes.
func sliceNode(s *resourcev1.ResourceSlice) string {
	if s == nil || s.Spec.NodeName == nil {
		return ""
	}
	return *s.Spec.NodeName
}

// indexSlice replaces (or, with k nil, removes) slice name in byNode,
// making a new nodeDevices for each node it touches. pl.mu is held.
func (pl *DynamicResources) indexSlice(name string, k *resourcev1.ResourceSlice) {
	rebuild := func(node string, list []*resourcev1.ResourceSlice) {
		if len(list) == 0 {
			delete(pl.byNode, node)
			return
		}
		slices.SortFunc(list, func(a, b *resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
		pl.byNode[node] = newNodeDevices(node, list)
	}
	if old, ok := pl.slicesK8s[name]; ok {
		n := sliceNode(old)
		var list []*resourcev1.ResourceSlice
		if nd := pl.byNode[n]; nd != nil {
			list = slices.DeleteFunc(slices.Clone(nd.slices), func(s *resourcev1.ResourceSlice) bool { return s.Name == name })
		}
		rebuild(n, list)
	}
	if k != nil {
		n := sliceNode(k)
		var list []*resourcev1.ResourceSlice
		if nd := pl.byNode[n]; nd != nil {
			list = slices.Clone(nd.slices)
		}
		rebuild(n, append(list, k))
	}
}

// List and Get make the plugin the allocator's DeviceClassLister.
func (pl *DynamicResources) List() ([]*resourcev1.DeviceClass, error) {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	out := make([]*resourcev1.DeviceClass, 0, len(pl.classesK8s))
	for _, c := range pl.classesK8s {
		out = append(out, c)
	}
	return out, nil
}

// Get implements structured.DeviceClassLister.
func (pl *DynamicResources) Get(name string) (*resourcev1.DeviceClass, error) {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	if c, ok := pl.classesK8s[name]; ok {
		return c, nil
	}
	return nil, api.NewNotFound(pl.classes.Kind(), name)
}

func k8sNode(n *api.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
}

// Filter implements framework.FilterPlugin.
func (pl *DynamicResources) Filter(ctx context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(dynamicResourcesStateKey)
	if !ok {
		return nil
	}
	s := d.(*draState)
	for _, c := range s.claims {
		if a := c.Status.Allocation; a != nil && a.NodeSelector != nil && !NodeSelectorMatches(a.NodeSelector, ni.Node) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonClaimNotOnNode).
				WithDetails(fmt.Sprintf("claim %s is allocated to devices usable on other nodes only", api.Key(c.Namespace, c.Name)))
		}
	}
	if len(s.toAllocate) == 0 {
		return nil
	}
	if s.simpleClassObj != nil {
		if fits, answered := pl.countFits(ctx, s, ni.Node.Name); answered && fits {
			s.mu.Lock()
			s.counted[ni.Node.Name] = ni.Node
			s.mu.Unlock()
			return nil // Reserve allocates on the chosen node (dynamicresources_fast.go)
		}
	}
	node := k8sNode(ni.Node)
	if pl.filterTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pl.filterTimeout)
		defer cancel()
	}
	results, err := pl.allocate(ctx, s, node)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		// DynamicResourcesArgs.filterTimeout: this node is given up, as
		// Kubernetes does, rather than holding up every other pod.
		return framework.NewStatus(framework.Unschedulable, ReasonAllocationTimedOut)
	}
	if err != nil && !errors.Is(err, structured.ErrFailedAllocationOnNode) {
		return framework.AsStatus(err)
	}
	if err == nil && len(results) == len(s.toAllocate) {
		s.mu.Lock()
		s.perNode[ni.Node.Name] = results
		s.mu.Unlock()
		return nil
	}
	st := framework.NewStatus(framework.Unschedulable, ReasonCannotAllocate)
	return st.WithDetails(pl.explain(ctx, s, pl.slicesFor(ni.Node.Name), node)...)
}

// allocate runs the structured allocator for the claims on one node, with
// the node's devices of the requested classes (the class CEL results
// cached, dynamicresources_fast.go).
func (pl *DynamicResources) allocate(ctx context.Context, s *draState, node *corev1.Node) ([]resourcev1.AllocationResult, error) {
	prepared, lister := pl.preparedSlices(ctx, s, node.Name)
	taken := pl.allocatedOn(pl.devicesOf(node.Name), pl.devicesOf(""))
	alloc, err := structured.NewAllocator(ctx, pl.features, taken, lister, prepared, pl.celCache)
	if err != nil {
		return nil, err
	}
	return alloc.Allocate(ctx, node, s.toAllocate)
}

// Reserve implements framework.ReservePlugin.
func (pl *DynamicResources) Reserve(ctx context.Context, state *framework.CycleState, _ *api.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(dynamicResourcesStateKey)
	if !ok {
		return nil
	}
	s := d.(*draState)
	if len(s.toAllocate) == 0 {
		return nil
	}
	s.mu.Lock()
	results, ok := s.perNode[nodeName]
	counted := s.counted[nodeName]
	s.mu.Unlock()
	if !ok && counted != nil { // Filter counted: allocate on this node now
		var err error
		results, err = pl.allocate(ctx, s, k8sNode(counted))
		ok = err == nil && len(results) == len(s.toAllocate)
	}
	if !ok {
		return framework.NewStatus(framework.Error, fmt.Sprintf("no allocation was computed for node %s", nodeName))
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for i, c := range s.toAllocate {
		r := results[i]
		r.AllocationTimestamp = &now
		results[i] = r
		pl.setAssumedLocked(string(c.UID), &results[i])
		pl.setAssumedGPUs(string(c.UID), &results[i])
		pl.beginWrite(string(c.UID), &results[i])
	}
	s.chosen = results
	return nil
}

// Unreserve implements framework.ReservePlugin.
func (pl *DynamicResources) Unreserve(_ context.Context, state *framework.CycleState, _ *api.Pod, _ string) {
	d, ok := state.Read(dynamicResourcesStateKey)
	if !ok {
		return
	}
	s := d.(*draState)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, c := range s.toAllocate {
		pl.setAssumedLocked(string(c.UID), nil)
		pl.gpus.setAssumed(string(c.UID), nil)
		pl.gpus.endWrite(string(c.UID))
	}
	s.chosen = nil
}

// PreBind implements framework.PreBindPlugin: for every claim, the
// finalizer, the allocation (when Reserve made one) and the pod in
// reservedFor, written before the pod is bound so the kubelet finds them.
//
// A pod asking for nvidia.com/gpu (the device plugin) first waits, with
// its context, until no other claim allocation of gpu.nvidia.com on its
// node is reserved but unwritten (ClaimedGPUs.WaitWrites): bound earlier,
// the node's device manager could hand it the GPU that claim is about to
// get, since it cannot see the claim's allocation yet.
func (pl *DynamicResources) PreBind(ctx context.Context, state *framework.CycleState, pod *api.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(dynamicResourcesStateKey)
	var s *draState
	if ok {
		s = d.(*draState)
	}
	if UsesDevicePluginGPUs(pod) {
		own := func(uid string) bool {
			if s == nil {
				return false
			}
			return slices.ContainsFunc(s.toAllocate, func(c *resourcev1.ResourceClaim) bool { return string(c.UID) == uid })
		}
		if err := pl.gpus.WaitWrites(ctx, nodeName, own); err != nil {
			return framework.AsStatus(fmt.Errorf("waiting for the GPU claim allocations on node %s to be written: %w", nodeName, err))
		}
	}
	if s == nil {
		return nil
	}
	defer func() {
		for _, c := range s.toAllocate {
			pl.gpus.endWrite(string(c.UID))
		}
	}()
	chosen := map[int]*api.AllocationResult{}
	for i, idx := range s.toAllocateIndex {
		if i < len(s.chosen) {
			a, err := fromKubernetes[api.AllocationResult](&s.chosen[i])
			if err != nil {
				return framework.AsStatus(err)
			}
			chosen[idx] = a
		}
	}
	var wrote []*api.ResourceClaim // the claims whose allocation this PreBind wrote
	for i, c := range s.claims {
		if orig, ok := s.unwritten[i]; ok {
			c, chosen[i] = orig, c.Status.Allocation
		}
		written, allocated, err := pl.bindClaim(ctx, c, chosen[i], pod)
		if err != nil {
			return framework.AsStatus(fmt.Errorf("claim %s: %w", api.Key(c.Namespace, c.Name), err))
		}
		if allocated {
			wrote = append(wrote, written)
		}
	}
	if err := pl.recheckSlices(ctx, nodeName, pod, wrote); err != nil {
		return framework.AsStatus(err)
	}
	return nil
}

// bindClaim writes one claim: finalizer first (an allocated claim must
// not vanish under its pod), then status. A conflict rereads the claim
// once; an allocation someone else wrote meanwhile fails the binding
// (the pod is retried). It returns the claim as written and whether this
// write allocated it.
func (pl *DynamicResources) bindClaim(ctx context.Context, c *api.ResourceClaim, allocation *api.AllocationResult, pod *api.Pod) (*api.ResourceClaim, bool, error) {
	for attempt := 0; ; attempt++ {
		cur := claimForWrite(c)
		if allocation != nil && cur.Status.Allocation != nil {
			if !sameDevices(allocation, cur.Status.Allocation) {
				return nil, false, fmt.Errorf("allocated by someone else meanwhile")
			}
			// A pod sharing the claim wrote this cycle's allocation
			// first (it used the assumed one): only reserve.
			allocation = nil
		}
		if !slices.Contains(cur.Finalizers, api.ResourceClaimFinalizer) {
			cur.Finalizers = append(cur.Finalizers, api.ResourceClaimFinalizer)
			updated, err := pl.client.Update(ctx, cur)
			if err != nil {
				if api.IsConflict(err) && attempt == 0 {
					if c, err = client.Get[*api.ResourceClaim](ctx, pl.client, c.Namespace, c.Name); err != nil {
						return nil, false, err
					}
					continue
				}
				return nil, false, err
			}
			cur = updated.(*api.ResourceClaim)
		}
		if allocation != nil {
			cur.Status.Allocation = allocation
		}
		if !cur.IsReservedFor(pod.UID) {
			cur.Status.ReservedFor = append(cur.Status.ReservedFor, api.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
		written, err := pl.client.UpdateStatus(ctx, cur)
		if err == nil {
			return written.(*api.ResourceClaim), allocation != nil, nil
		}
		if !api.IsConflict(err) || attempt > 0 {
			return nil, false, err
		}
		if c, err = client.Get[*api.ResourceClaim](ctx, pl.client, c.Namespace, c.Name); err != nil {
			return nil, false, err
		}
	}
}

// claimForWrite copies what bindClaim changes of a claim (finalizers,
// status.reservedFor; status.allocation is replaced, not changed), so the
// informer's object stays untouched, without copying the whole claim.
func claimForWrite(c *api.ResourceClaim) *api.ResourceClaim {
	cur := *c
	cur.Finalizers = slices.Clone(c.Finalizers)
	cur.Status.ReservedFor = slices.Clone(c.Status.ReservedFor)
	return &cur
}

// NodeSelectorMatches reports whether node matches one of sel's terms.
func NodeSelectorMatches(sel *api.NodeSelector, node *api.Node) bool {
	p := &api.Pod{Spec: api.PodSpec{Affinity: &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}}}
	return RequiredNodeAffinityMatches(p, node)
}
