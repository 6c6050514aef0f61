package framework

// StateKey names one entry of a CycleState; by convention a plugin uses
// "PreFilter" + its name.
type StateKey string

// StateData is what plugins keep in a CycleState. Clone must return a
// copy that preemption can change without touching the original (data that
// is never changed after PreFilter may return itself).
type StateData interface {
	Clone() StateData
}

// CycleState carries data between the extension points of one scheduling
// cycle of one pod: PreFilter computes something once (the pod's total
// requests), Filter and Score read it for every node.
//
// Rules: write only in PreFilter and Reserve, which run on the scheduling
// goroutine; Filter and Score may run on many goroutines at once and only
// read. Because of that rule, no lock is needed (and none is taken: a
// shared lock would be touched once per node per plugin).
type CycleState struct {
	data map[StateKey]StateData
	// nodes: the cycle's snapshot of every node, for plugins that count
	// pods across the cluster (InterPodAffinity, PodTopologySpread).
	nodes []*NodeInfo
	// skipFilter: the plugins whose PreFilter returned Skip; their
	// Filter does not run for this pod (nil: none).
	skipFilter map[string]bool
	// filterPlan: when some filters are skipped, the indices in
	// planOf.Filter of those that run (RunPreFilter makes it).
	filterPlan []int
	planOf     *Framework
}

// SetNodes records the cycle's snapshot of every node; the scheduler
// calls it before PreFilter.
func (c *CycleState) SetNodes(nodes []*NodeInfo) { c.nodes = nodes }

// Nodes returns every node of the cycle's snapshot (do not change them).
func (c *CycleState) Nodes() []*NodeInfo { return c.nodes }

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{data: make(map[StateKey]StateData, 4)}
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, data StateData) { c.data[key] = data }

// Read returns the data under key, or false.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	d, ok := c.data[key]
	return d, ok
}

// Clone copies the state (each entry through its Clone), for preemption's
// what-if runs.
func (c *CycleState) Clone() *CycleState {
	out := &CycleState{data: make(map[StateKey]StateData, len(c.data)), nodes: c.nodes, skipFilter: c.skipFilter, filterPlan: c.filterPlan, planOf: c.planOf}
	for k, v := range c.data {
		out.data[k] = v.Clone()
	}
	return out
}
