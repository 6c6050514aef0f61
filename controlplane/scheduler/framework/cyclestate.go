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
	// data holds the entries in the order written: a cycle has a handful
	// (one per plugin with a PreFilter), and Filter and Score read them
	// for every node, so a scan that compares keys (their lengths first,
	// then their bytes, which for the plugin's own constant is one pointer
	// compare) beats hashing the key into a map (BenchmarkCycleStateRead).
	data []stateEntry
	// nodes: the cycle's snapshot of every node, for plugins that count
	// pods across the cluster (InterPodAffinity, PodTopologySpread).
	nodes []*NodeInfo
	// podsWithAffinity and podsWithRequiredAnti count the pods on nodes
	// (those with a Node) with pod (anti-)affinity terms, and with required
	// anti-affinity: InterPodAffinity skips its scan of every node when
	// they are 0.
	podsWithAffinity, podsWithRequiredAnti int
	// skipFilter: the plugins whose PreFilter returned Skip; their
	// Filter does not run for this pod (nil: none).
	skipFilter map[string]bool
	// filterPlan: when some filters are skipped, the indices in
	// planOf.Filter of those that run (RunPreFilter makes it).
	filterPlan []int
	planOf     *Framework
}

// SetNodes records the cycle's snapshot of every node, before PreFilter,
// and counts their pods with affinity terms.
func (c *CycleState) SetNodes(nodes []*NodeInfo) {
	withAffinity, withRequiredAnti := 0, 0
	for _, ni := range nodes {
		if ni.Node != nil {
			withAffinity += ni.PodsWithAffinity
			withRequiredAnti += ni.PodsWithRequiredAntiAffinity
		}
	}
	c.SetNodesCounted(nodes, withAffinity, withRequiredAnti)
}

// SetNodesCounted is SetNodes with the counts of PodsWithAffinity given
// (the scheduler's cache keeps them): no pass over every node.
func (c *CycleState) SetNodesCounted(nodes []*NodeInfo, withAffinity, withRequiredAnti int) {
	c.nodes, c.podsWithAffinity, c.podsWithRequiredAnti = nodes, withAffinity, withRequiredAnti
}

// PodsWithAffinity returns how many pods on the nodes (those with a Node)
// have pod affinity or anti-affinity terms, and how many have required
// anti-affinity terms.
func (c *CycleState) PodsWithAffinity() (withAffinity, withRequiredAnti int) {
	return c.podsWithAffinity, c.podsWithRequiredAnti
}

// Nodes returns every node of the cycle's snapshot (do not change them).
func (c *CycleState) Nodes() []*NodeInfo { return c.nodes }

// stateEntry is one entry of a CycleState.
type stateEntry struct {
	key  StateKey
	data StateData
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{data: make([]stateEntry, 0, 8)}
}

// Write stores data under key, replacing what key held.
func (c *CycleState) Write(key StateKey, data StateData) {
	for i := range c.data {
		if c.data[i].key == key {
			c.data[i].data = data
			return
		}
	}
	c.data = append(c.data, stateEntry{key, data})
}

// Read returns the data under key, or false.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	for i := range c.data {
		if c.data[i].key == key {
			return c.data[i].data, true
		}
	}
	return nil, false
}

// Clone copies the state (each entry through its Clone), for preemption's
// what-if runs.
func (c *CycleState) Clone() *CycleState {
	out := &CycleState{data: make([]stateEntry, len(c.data), cap(c.data)), nodes: c.nodes, podsWithAffinity: c.podsWithAffinity, podsWithRequiredAnti: c.podsWithRequiredAnti, skipFilter: c.skipFilter, filterPlan: c.filterPlan, planOf: c.planOf}
	for i, e := range c.data {
		out.data[i] = stateEntry{e.key, e.data.Clone()}
	}
	return out
}
