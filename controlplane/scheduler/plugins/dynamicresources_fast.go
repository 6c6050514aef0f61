package plugins

import (
	"context"
	"slices"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Two ways DynamicResources' Filter avoids work the structured allocator
// would repeat on every node for every pod, without changing one outcome:
//
// # Device class results, cached
//
// Whether a device matches a DeviceClass's CEL selectors depends only on
// the class and the device: the result is kept per (slice at its
// resourceVersion, class at its resourceVersion) for each device, and
// reused until either changes. The allocator gets the node's devices
// that match a class the pod asks for, and, when the pod asks for one
// class only, that class without its selectors (they were applied): it
// evaluates no class CEL at all.
//
// # One class, counted
//
// Most GPU claims are NVIDIA's quick start: exactly N devices of one
// class, no selectors of their own, no constraints. For such a pod a node
// fits exactly when it has N free devices of the class: Filter counts
// them (the cached results, the allocated set) instead of running the
// allocator, and Reserve runs the allocator once, on the chosen node, for
// the devices. Anything the count could get wrong sends the node through
// the allocator as before: devices shared, tainted, consuming counters,
// with binding conditions or per-device node selection; pools spread
// over several slices or not complete; slices not the node's own; and a
// node the count rejects (so its Status and the explanation are the
// allocator's).

// nodeDevices is what the plugin keeps of one node's ResourceSlices
// (and, under "", of the slices not of one node): the slices, the ID of
// each of their devices in order, whether Filter may count them, and the
// class CEL results, by class version, one per device. It is replaced,
// never changed, when a slice of the node changes, so the results never
// outlive the devices they were computed on.
type nodeDevices struct {
	slices []*resourcev1.ResourceSlice
	ids    []structured.DeviceID
	// countable: every slice is the node's own, the only one of its pool,
	// and no device is shared, tainted, consumes counters, has binding
	// conditions or its own node selection.
	countable bool

	mu      sync.RWMutex
	byClass map[string][]bool
}

func newNodeDevices(node string, slices []*resourcev1.ResourceSlice) *nodeDevices {
	nd := &nodeDevices{slices: slices, countable: node != "", byClass: map[string][]bool{}}
	pools := map[string]bool{}
	for _, sl := range slices {
		sp := &sl.Spec
		pool := sp.Driver + "/" + sp.Pool.Name
		if pools[pool] || sp.Pool.ResourceSliceCount != 1 || (sp.PerDeviceNodeSelection != nil && *sp.PerDeviceNodeSelection) || hasCounters(sl) {
			nd.countable = false
		}
		pools[pool] = true
		for i := range sp.Devices {
			d := &sp.Devices[i]
			if len(d.Taints) > 0 || len(d.BindingConditions) > 0 || (d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations) {
				nd.countable = false
			}
			nd.ids = append(nd.ids, structured.MakeDeviceID(sp.Driver, sp.Pool.Name, d.Name))
		}
	}
	return nd
}

// classKey names a class at its version in the cache.
func classKey(c *resourcev1.DeviceClass) string { return c.Name + "@" + c.ResourceVersion }

// ofClass reports, for each device (in ids order), whether it matches
// every selector of class (key is classKey(class)). ok is false when a
// selector did not evaluate (a CEL runtime error): the allocator then
// decides, and reports it.
func (nd *nodeDevices) ofClass(ctx context.Context, cache *cel.Cache, class *resourcev1.DeviceClass, key string) ([]bool, bool) {
	nd.mu.RLock()
	m, ok := nd.byClass[key]
	nd.mu.RUnlock()
	if ok {
		return m, true
	}
	m = make([]bool, 0, len(nd.ids))
	for _, sl := range nd.slices {
		for i := range sl.Spec.Devices {
			d := &sl.Spec.Devices[i]
			match := true
			for _, sel := range class.Spec.Selectors {
				if sel.CEL == nil {
					continue
				}
				res := cache.GetOrCompile(sel.CEL.Expression)
				if res.Error != nil {
					return nil, false
				}
				ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: sl.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations})
				if err != nil {
					return nil, false
				}
				if !ok {
					match = false
					break
				}
			}
			m = append(m, match)
		}
	}
	nd.mu.Lock()
	nd.byClass[key] = m
	nd.mu.Unlock()
	return m, true
}

// simpleDemand is what a pod's claims ask when they are all "exactly N of
// class C": the class and the total count; ok false otherwise.
func simpleDemand(claims []*resourcev1.ResourceClaim) (class string, count int64, ok bool) {
	for _, c := range claims {
		if len(c.Spec.Devices.Constraints) > 0 {
			return "", 0, false
		}
		for _, r := range c.Spec.Devices.Requests {
			e := r.Exactly
			if e == nil || len(e.Selectors) > 0 || len(e.Tolerations) > 0 || e.Capacity != nil ||
				(e.AdminAccess != nil && *e.AdminAccess) ||
				(e.AllocationMode != "" && e.AllocationMode != resourcev1.DeviceAllocationModeExactCount) {
				return "", 0, false
			}
			if class != "" && e.DeviceClassName != class {
				return "", 0, false
			}
			class = e.DeviceClassName
			count += max(e.Count, 1)
		}
	}
	return class, count, class != ""
}

// preparedSlices returns the node's slices for the allocator: only the
// devices that match a class the pod asks for (slices untouched when one
// consumes counters), and the class lister to hand it (without the
// selectors of the only class, when the pod asks for one and every slice
// could be filtered).
func (pl *DynamicResources) preparedSlices(ctx context.Context, s *draState, node string) ([]*resourcev1.ResourceSlice, structured.DeviceClassLister) {
	own, shared := pl.devicesOf(node), pl.devicesOf("")
	var all []*resourcev1.ResourceSlice
	for _, nd := range []*nodeDevices{own, shared} {
		if nd != nil {
			all = append(all, nd.slices...)
		}
	}
	classes := make([]*resourcev1.DeviceClass, 0, len(s.classes))
	for _, name := range s.classes {
		c, err := pl.Get(name)
		if err != nil {
			return all, pl
		}
		classes = append(classes, c)
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(all))
	allFiltered := true
	for _, nd := range []*nodeDevices{own, shared} {
		if nd == nil {
			continue
		}
		matches := make([][]bool, len(classes))
		for i, c := range classes {
			m, ok := nd.ofClass(ctx, pl.celCache, c, classKey(c))
			if !ok {
				return all, pl // a CEL error: the allocator reports it
			}
			matches[i] = m
		}
		at := 0 // index of the slice's first device in the node's order
		for _, sl := range nd.slices {
			n := len(sl.Spec.Devices)
			if hasCounters(sl) {
				out = append(out, sl)
				allFiltered = false
				at += n
				continue
			}
			var kept []resourcev1.Device
			for j := range n {
				if slices.ContainsFunc(matches, func(m []bool) bool { return m[at+j] }) {
					kept = append(kept, sl.Spec.Devices[j])
				}
			}
			at += n
			if len(kept) == n {
				out = append(out, sl)
				continue
			}
			cp := *sl
			cp.Spec.Devices = kept
			out = append(out, &cp)
		}
	}
	if len(classes) == 1 && allFiltered {
		stripped := *classes[0]
		stripped.Spec.Selectors = nil
		return out, appliedClass{DynamicResources: pl, class: &stripped}
	}
	return out, pl
}

func hasCounters(sl *resourcev1.ResourceSlice) bool {
	if len(sl.Spec.SharedCounters) > 0 {
		return true
	}
	for i := range sl.Spec.Devices {
		if len(sl.Spec.Devices[i].ConsumesCounters) > 0 {
			return true
		}
	}
	return false
}

// appliedClass lists one class without its selectors (already applied to
// the devices the allocator is given) and the others as they are.
type appliedClass struct {
	*DynamicResources
	class *resourcev1.DeviceClass
}

func (a appliedClass) Get(name string) (*resourcev1.DeviceClass, error) {
	if name == a.class.Name {
		return a.class, nil
	}
	return a.DynamicResources.Get(name)
}

// countFits answers Filter for a simple demand by counting: fits, and
// whether the count could answer at all (false: use the allocator).
func (pl *DynamicResources) countFits(ctx context.Context, s *draState, node string) (fits, answered bool) {
	nd := pl.devicesOf(node)
	if nd == nil || !nd.countable || s.simpleClassObj == nil || pl.devicesOf("") != nil {
		return false, false
	}
	m, ok := nd.ofClass(ctx, pl.celCache, s.simpleClassObj, s.simpleKey)
	if !ok {
		return false, false
	}
	var free int64
	pl.mu.RLock()
	for i, id := range nd.ids {
		if m[i] && pl.inUse[id] == 0 {
			free++
		}
	}
	pl.mu.RUnlock()
	return free >= s.simpleCount, free >= s.simpleCount
}
