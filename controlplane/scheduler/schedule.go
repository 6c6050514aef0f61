package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/extender"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// CycleResult is everything one scheduling attempt found: the verdict of
// every filter on every node it looked at, every score, the chosen node,
// or the message saying why there was none. Explain renders it; the
// scheduler also records it as trace spans on the pod.
type CycleResult struct {
	// Pod is namespace/name.
	Pod string
	// NumNodes in the snapshot.
	NumNodes int
	// PreFilterPlugin and PreFilterStatus: set when a PreFilter rejected the pod.
	PreFilterPlugin string
	PreFilterStatus *framework.Status
	// FilterPlugins in the order they ran.
	FilterPlugins []string
	// Nodes: the filter verdict of each node looked at, in the order they
	// were looked at. Fewer than NumNodes when enough feasible nodes were
	// found early (PercentageOfNodesToScore).
	Nodes []NodeFilterResult
	// ScorePlugins with their weights, in the order they ran.
	ScorePlugins []ScorePluginInfo
	// Scores of the feasible nodes, in the order of Nodes.
	Scores []NodeScoreResult
	// SelectedNode is the winner; "" when no node fits.
	SelectedNode string
	// Message is the FailedScheduling message when no node fits.
	Message string
	// Preemption: what preemption (DefaultPreemption, a PostFilter
	// plugin) found, when it was tried.
	Preemption *PreemptionResult
	// Nominated is the node a PostFilter plugin made room on ("" when
	// none could): the pod tries it first next time.
	Nominated string
	// ExtenderErrors: what ignorable extenders failed with (skipped), and
	// prioritize errors (never fatal).
	ExtenderErrors []string
	// Start, FilterEnd and ScoreEnd time the phases.
	Start, FilterEnd, ScoreEnd time.Time

	// nameFirst is the index in Scores of the node whose name sorts
	// first. Scores come in the order the nodes were looked at: round
	// robin over the snapshot, which is sorted by name, so Scores[nameFirst:]
	// then Scores[:nameFirst] is name order, and a tie between two totals
	// is broken by comparing ranks (nameRank), not names.
	nameFirst int

	// bufs hold Nodes, Scores and the cycle's other per-node arrays when
	// they came from cycleBufPool (the scheduling loop's cycles); release
	// gives them back once the trace is written.
	bufs *cycleBufs
	// hist is reasonHistogram(Nodes), once made (histDone) by fitMessage.
	hist     string
	histDone bool
}

// cycleBufs are the arrays of one cycle that grow with the nodes looked
// at: a filter verdict per node, a score row and 2 × plugins scores per
// feasible node (about 100 KB for the 500 feasible nodes of a 5,000-node
// cluster). The scheduling loop takes them from a pool and gives them
// back after the binding's trace is written, so that thousands of pods a
// second do not each allocate (and the GC scan) them anew.
type cycleBufs struct {
	nodes    []NodeFilterResult
	feasible []*framework.NodeInfo
	scores   []NodeScoreResult
	raw      []int64
	list     []framework.NodeScore
}

var cycleBufPool = sync.Pool{New: func() any { return new(cycleBufs) }}

// release gives r's arrays back to the pool; r's Nodes and Scores are
// gone after it. Only for results of the scheduling loop, after their
// last use.
func (r *CycleResult) release() {
	if r == nil || r.bufs == nil {
		return
	}
	b := r.bufs
	r.bufs, r.Nodes, r.Scores = nil, nil, nil
	// Drop what the arrays point to (nodes' names, statuses, NodeInfos)
	// so the pool keeps no old objects alive. A cycle writes only below
	// the lengths the arrays are kept with (findFeasible clears what it
	// cut off), so clearing up to them leaves every array zero to its
	// capacity: a pod that looked at 500 nodes clears 500 entries, not
	// the 5,000 of the largest cycle before it.
	clear(b.nodes)
	clear(b.feasible)
	clear(b.scores)
	clear(b.list)
	cycleBufPool.Put(b)
}

// rejectors lists the plugins that turned the pod away: the PreFilter
// plugin, or every node's rejecting Filter plugin (once each); the
// queueing hints of these decide when it is tried again.
func (r *CycleResult) rejectors() []string {
	if r.PreFilterPlugin != "" {
		return []string{r.PreFilterPlugin}
	}
	var out []string
	for _, n := range r.Nodes {
		if n.Plugin >= 0 && n.Plugin < len(r.FilterPlugins) && !slices.Contains(out, r.FilterPlugins[n.Plugin]) {
			out = append(out, r.FilterPlugins[n.Plugin])
		}
	}
	return out
}

// NodeFilterResult is one node's filter verdict.
type NodeFilterResult struct {
	Node string
	// Plugin is the index in FilterPlugins of the plugin that rejected the
	// node; -1 when every filter passed. Filters after it did not run.
	Plugin int
	// Status of the rejecting plugin; nil when the node passed.
	Status *framework.Status
}

// Feasible reports whether every filter passed.
func (r NodeFilterResult) Feasible() bool { return r.Plugin < 0 }

// ScorePluginInfo names a score plugin and its weight (in the trace:
// api.SchedulingScoreDetails).
type ScorePluginInfo = api.SchedulingScorePlugin

// NodeScoreResult is one feasible node's scores, indexed like ScorePlugins.
type NodeScoreResult struct {
	Node string
	// Raw is what Score returned; Normalized is after NormalizeScore (0..100).
	Raw, Normalized []int64
	// Total is the sum of Normalized × weight.
	Total int64
}

// Messages and limits as in Kubernetes.
const (
	// ErrNoNodesMessage is the message when the cluster has no node at all.
	ErrNoNodesMessage = "no nodes available to schedule pods"
	// minFeasibleNodesToFind: below this many nodes, every node is looked at.
	minFeasibleNodesToFind = 100
	// minFeasibleNodesPercentageToFind floors the adaptive percentage.
	minFeasibleNodesPercentageToFind = 5
	// parallelThreshold: fewer nodes than this are filtered on the calling
	// goroutine (small clusters, tests: no goroutines at all).
	parallelThreshold = 100
)

// algorithm is the pure part of a cycle: filter, score, select.
type algorithm struct {
	fwk         *framework.Framework
	percentage  int32
	parallelism int
	// nominated pods per node, from the queue (may be nil).
	nominated map[string][]*framework.PodInfo
	// noVictims is the shared "No preemption victims" status.
	noVictims *framework.Status
	// extensions: some PreFilter plugin counts pods across nodes
	// (PreFilterExtensions), so imagined pods must be told to it.
	extensions bool
	// extenders: the scheduler's HTTP(S) extenders (extenders.go).
	extenders []*extender.Extender
	// pooled: results take their arrays from cycleBufPool (the
	// scheduling loop, which releases them).
	pooled bool
}

// numFeasibleNodesToFind is how many feasible nodes are enough, as
// Kubernetes: looking at every node of a 5,000-node cluster for every pod
// would be slow, and the 500th-best node is about as good as the best.
func (a *algorithm) numFeasibleNodesToFind(numAll int) int {
	if numAll < minFeasibleNodesToFind {
		return numAll
	}
	pct := int(a.percentage)
	if pct <= 0 {
		pct = 50 - numAll/125
		pct = max(pct, minFeasibleNodesPercentageToFind)
	}
	n := numAll * pct / 100
	return max(n, minFeasibleNodesToFind)
}

// schedule runs PreFilter, Filter and Score for pod over the snapshot,
// starting at node index start (nodes are visited round robin across
// cycles, so a big cluster's later nodes get their turn). It returns the
// result and how many nodes it looked at.
func (a *algorithm) schedule(ctx context.Context, state *framework.CycleState, pod *api.Pod, snap *Snapshot, start int, now func() time.Time) (*CycleResult, int, error) {
	nodes := snap.Nodes()
	res := &CycleResult{Pod: api.Key(pod.Namespace, pod.Name), NumNodes: len(nodes), Start: now()}
	if a.pooled {
		res.bufs = cycleBufPool.Get().(*cycleBufs)
	}
	for _, p := range a.fwk.Filter {
		res.FilterPlugins = append(res.FilterPlugins, p.Name())
	}
	for _, p := range a.fwk.Score {
		res.ScorePlugins = append(res.ScorePlugins, ScorePluginInfo{Name: p.Name(), Weight: p.Weight})
	}
	if len(nodes) == 0 {
		res.Message = ErrNoNodesMessage
		res.FilterEnd, res.ScoreEnd = now(), now()
		return res, 0, nil
	}
	state.SetNodesCounted(nodes, snap.podsWithAffinity, snap.podsWithRequiredAnti)
	if s, plugin := a.fwk.RunPreFilter(ctx, state, pod); !s.IsSuccess() {
		if s.Code() == framework.Error {
			return nil, 0, fmt.Errorf("prefilter %s: %w", plugin, s.AsError())
		}
		res.PreFilterPlugin, res.PreFilterStatus = plugin, s
		res.Message = fitMessage(res, "")
		res.FilterEnd, res.ScoreEnd = now(), now()
		return res, 0, nil
	}

	// A pod that preemption made room for tries its nominated node first.
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if ni := snap.Get(nn); ni != nil {
			r := a.filterNode(ctx, state, pod, ni)
			if r.Status.Code() == framework.Error {
				return nil, 0, fmt.Errorf("filter %s on node %q: %w", res.FilterPlugins[r.Plugin], nn, r.Status.AsError())
			}
			if r.Feasible() {
				res.Nodes = []NodeFilterResult{r}
				res.FilterEnd = now()
				if err := a.score(ctx, state, pod, res, []*framework.NodeInfo{ni}); err != nil {
					return nil, 0, err
				}
				res.ScoreEnd = now()
				res.SelectedNode = nn
				return res, 0, nil
			}
		}
	}

	feasible, processed, err := a.findFeasible(ctx, state, pod, snap, start, res)
	if err == nil && len(feasible) > 0 && len(a.extenders) > 0 {
		feasible, err = a.runExtenderFilters(ctx, pod, feasible, res)
	}
	res.FilterEnd = now()
	if err != nil {
		return nil, 0, err
	}
	if len(feasible) == 0 {
		res.Message = fitMessage(res, "")
		res.ScoreEnd = now()
		return res, processed, nil
	}
	if err := a.score(ctx, state, pod, res, feasible); err != nil {
		return nil, 0, err
	}
	if len(a.extenders) > 0 {
		a.runExtenderPrioritizers(ctx, pod, feasible, res)
	}
	res.ScoreEnd = now()
	res.SelectedNode = res.selectHost()
	return res, processed, nil
}

// filterNode runs the filters on one node. Pods nominated to the node with
// at least this pod's priority count as if they were already there (and
// the PreFilter plugins that count pods are told so, on a copy of state).
func (a *algorithm) filterNode(ctx context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) NodeFilterResult {
	name := ni.Name() // from the NodeInfo: reading the Node is a cache miss per node
	if noms := a.nominatedFor(pod, ni); len(noms) > 0 {
		ni = ni.Clone()
		if a.extensions {
			state = state.Clone()
		}
		for _, p := range noms {
			ni.AddPod(p)
			if a.extensions {
				if s := a.fwk.RunPreFilterAddPod(ctx, state, pod, p, ni); !s.IsSuccess() {
					return NodeFilterResult{Node: name, Plugin: 0, Status: framework.NewStatus(framework.Error, s.Message())}
				}
			}
		}
	}
	s, i := a.fwk.RunFilter(ctx, state, pod, ni)
	return NodeFilterResult{Node: name, Plugin: i, Status: s}
}

// nominatedFor lists the pods nominated to ni that count for pod: of at
// least its priority, not itself.
func (a *algorithm) nominatedFor(pod *api.Pod, ni *framework.NodeInfo) []*framework.PodInfo {
	if len(a.nominated) == 0 {
		return nil
	}
	noms := a.nominated[ni.Node.Name]
	if len(noms) == 0 {
		return nil
	}
	key, prio := api.Key(pod.Namespace, pod.Name), framework.PodPriority(pod)
	var out []*framework.PodInfo
	for _, p := range noms {
		if p.Key != key && p.Priority >= prio {
			out = append(out, p)
		}
	}
	return out
}

func (a *algorithm) withNominated(pod *api.Pod, ni *framework.NodeInfo) *framework.NodeInfo {
	noms := a.nominatedFor(pod, ni)
	if len(noms) == 0 {
		return ni
	}
	out := ni.Clone()
	for _, p := range noms {
		out.AddPod(p)
	}
	return out
}

// findFeasible filters nodes from start, round robin, until enough feasible
// nodes are found or all were looked at. Nodes are filtered in batches,
// in parallel for big batches; results are collected in node order, so
// the outcome does not depend on goroutine timing. When the filters can
// tell from the snapshot's summary that every node turns the pod away
// (Framework.RunFilterEveryNode: a nodeSelector no node matches), each
// node gets that verdict without being visited.
func (a *algorithm) findFeasible(ctx context.Context, state *framework.CycleState, pod *api.Pod, snap *Snapshot, start int, res *CycleResult) ([]*framework.NodeInfo, int, error) {
	nodes := snap.Nodes()
	n := len(nodes)
	want := a.numFeasibleNodesToFind(n)
	var feasible []*framework.NodeInfo
	if res.bufs != nil {
		feasible = res.bufs.feasible[:0]
		res.Nodes = res.bufs.nodes[:0]
	}
	if s, plugin, ok := a.fwk.RunFilterEveryNode(ctx, state, pod, snap); ok {
		res.Nodes = slices.Grow(res.Nodes, n)[:n]
		for i := range n {
			res.Nodes[i] = NodeFilterResult{Node: snap.names[(start+i)%n], Plugin: plugin, Status: s}
		}
		if res.bufs != nil {
			res.bufs.nodes = res.Nodes
		}
		return nil, n, nil
	}
	processed := 0
	for processed < n && len(feasible) < want {
		batch := min(n-processed, max(want-len(feasible), parallelThreshold))
		// Filter the batch straight into res.Nodes' tail; what follows the
		// want-th feasible node is cut off again below.
		at := len(res.Nodes)
		res.Nodes = slices.Grow(res.Nodes, batch)[:at+batch]
		dst := res.Nodes[at:]
		first := start + processed
		a.parallelize(batch, func(i int) {
			dst[i] = a.filterNode(ctx, state, pod, nodes[(first+i)%n])
		})
		kept := at
		for i := range batch {
			r := &dst[i]
			if r.Status.Code() == framework.Error {
				return nil, 0, fmt.Errorf("filter %s on node %q: %w", res.FilterPlugins[r.Plugin], r.Node, r.Status.AsError())
			}
			kept++
			processed++
			if r.Feasible() {
				feasible = append(feasible, nodes[(first+i)%n])
				if len(feasible) == want {
					break
				}
			}
		}
		clear(res.Nodes[kept:])
		res.Nodes = res.Nodes[:kept]
	}
	if res.bufs != nil {
		res.bufs.nodes, res.bufs.feasible = res.Nodes, feasible // keep what grew
	}
	return feasible, processed, nil
}

// parallelize calls f(0..n-1), on up to Parallelism goroutines when n is
// big enough to be worth it, else on the caller's goroutine.
//
// The caller works too, and waits only for the chunks a helper has taken:
// a helper the Go scheduler has not started yet (both CPUs busy with
// binds and API writes) finds nothing left and returns. Waiting for every
// helper instead left the scheduling loop parked three quarters of its
// time behind the goroutines queued for a CPU (docs/performance.md, "The
// scheduling loop stops waiting").
func (a *algorithm) parallelize(n int, f func(i int)) {
	workers := min(a.parallelism, runtime.GOMAXPROCS(0), n/parallelThreshold*4)
	if n < parallelThreshold || workers < 2 {
		for i := range n {
			f(i)
		}
		return
	}
	const chunk = 32
	var next, done atomic.Int64
	finished := make(chan struct{})
	work := func() {
		for {
			lo := int(next.Add(chunk)) - chunk
			if lo >= n {
				return
			}
			hi := min(lo+chunk, n)
			for i := lo; i < hi; i++ {
				f(i)
			}
			if done.Add(int64(hi-lo)) == int64(n) {
				close(finished) // the last chunk, whoever ran it
			}
		}
	}
	for range workers - 1 {
		go work()
	}
	work()
	<-finished
}

// score runs the score plugins over the feasible nodes, normalises each
// plugin's scores, weights them and sums.
func (a *algorithm) score(ctx context.Context, state *framework.CycleState, pod *api.Pod, res *CycleResult, feasible []*framework.NodeInfo) error {
	skip, st := a.fwk.RunPreScore(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return fmt.Errorf("prescore %s: %w", st.Plugin(), st.AsError())
	}
	np := len(a.fwk.Score)
	var raw []int64 // one array for all Raw and Normalized
	var list []framework.NodeScore
	if b := res.bufs; b != nil {
		b.scores = slices.Grow(b.scores[:0], len(feasible))[:len(feasible)]
		b.raw = slices.Grow(b.raw[:0], 2*np*len(feasible))[:2*np*len(feasible)]
		b.list = slices.Grow(b.list[:0], len(feasible))[:len(feasible)]
		res.Scores, raw, list = b.scores, b.raw, b.list
		clear(raw) // plugins skipped leave their scores 0
	} else {
		res.Scores = make([]NodeScoreResult, len(feasible))
		raw = make([]int64, 2*np*len(feasible))
		list = make([]framework.NodeScore, len(feasible))
	}
	for i, ni := range feasible {
		res.Scores[i] = NodeScoreResult{Node: ni.Name(), Raw: raw[2*np*i : 2*np*i+np : 2*np*i+np], Normalized: raw[2*np*i+np : 2*np*(i+1) : 2*np*(i+1)]}
	}
	res.findNameFirst()
	skipped := make([]bool, np) // by index: looked up once, not once per node
	for p, sp := range a.fwk.Score {
		skipped[p] = skip[sp.Name()]
	}
	var firstErr atomic.Pointer[error]
	a.parallelize(len(feasible), func(i int) {
		ni := a.withNominated(pod, feasible[i])
		for p, sp := range a.fwk.Score {
			if skipped[p] {
				continue // its PreScore said there is nothing to score
			}
			v, s := sp.Score(ctx, state, pod, ni)
			if !s.IsSuccess() {
				err := fmt.Errorf("score %s on node %q: %w", sp.Name(), ni.Node.Name, s.AsError())
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			res.Scores[i].Raw[p] = v
		}
	})
	if e := firstErr.Load(); e != nil {
		return *e
	}
	for p, sp := range a.fwk.Score {
		if skipped[p] {
			continue
		}
		for i := range res.Scores {
			list[i] = framework.NodeScore{Name: res.Scores[i].Node, Score: res.Scores[i].Raw[p]}
		}
		if s := sp.NormalizeScore(ctx, state, pod, list); !s.IsSuccess() {
			return fmt.Errorf("normalize %s: %w", sp.Name(), s.AsError())
		}
		for i := range res.Scores {
			v := min(max(list[i].Score, 0), framework.MaxNodeScore)
			res.Scores[i].Normalized[p] = v
			res.Scores[i].Total += v * sp.Weight
		}
	}
	return nil
}

// postFilter runs the profile's PostFilter plugins for a pod no node
// passed (preemption's search: DefaultPreemption), records what they did
// in res (Preemption, Nominated) and adds their account to the message.
func (a *algorithm) postFilter(ctx context.Context, state *framework.CycleState, pod *api.Pod, snap *Snapshot, res *CycleResult) error {
	if len(a.fwk.PostFilter) == 0 {
		return nil
	}
	state.Write(cycleKey, &cycleData{a: a, snap: snap, res: res})
	var filtered []framework.NodeStatus
	for _, p := range a.fwk.PostFilter {
		if _, own := p.(*defaultPreemption); own {
			continue // reads the result itself (cycleData), not the list
		}
		filtered = make([]framework.NodeStatus, len(res.Nodes))
		for i, n := range res.Nodes {
			filtered[i] = framework.NodeStatus{Node: n.Node, Status: n.Status}
		}
		break
	}
	r, st := a.fwk.RunPostFilter(ctx, state, pod, filtered)
	if st.Code() == framework.Error {
		return fmt.Errorf("postfilter %s: %w", st.Plugin(), st.AsError())
	}
	if r != nil && r.NominatedNodeName != "" {
		res.Nominated = r.NominatedNodeName
		return nil
	}
	if st != nil && st.Message() != "" {
		res.Message = fitMessage(res, st.Message())
	}
	return nil
}

// cycleKey holds, in the CycleState, what the scheduler's own PostFilter
// plugin (DefaultPreemption) reads: the algorithm, snapshot and result of
// the attempt.
const cycleKey framework.StateKey = "skiff.dev/cycle"

type cycleData struct {
	a    *algorithm
	snap *Snapshot
	res  *CycleResult
}

func (c *cycleData) Clone() framework.StateData { return c }

// selectHost picks the highest total. Ties go to the node whose name sorts
// first: the same cluster gives the same answer every time, which makes
// decisions easy to follow and to test. (Kubernetes picks among ties at
// random, which spreads identical pods a little more evenly.)
func (r *CycleResult) selectHost() string {
	best := -1
	for i := range r.Scores {
		if best < 0 || r.Scores[i].Total > r.Scores[best].Total ||
			(r.Scores[i].Total == r.Scores[best].Total && r.nameRank(i) < r.nameRank(best)) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return r.Scores[best].Node
}

// findNameFirst sets nameFirst. The names rise, wrap round once at most,
// and rise again, so the first name that sorts before Scores[0]'s is found
// by binary search; none does when Scores start at the first name.
func (r *CycleResult) findNameFirst() {
	s := r.Scores
	r.nameFirst = 0
	if len(s) > 1 {
		r.nameFirst = sort.Search(len(s), func(j int) bool { return s[j].Node < s[0].Node }) % len(s)
	}
}

// nameRank is Scores[i]'s place in name order (nameFirst).
func (r *CycleResult) nameRank(i int) int {
	if i -= r.nameFirst; i < 0 {
		i += len(r.Scores)
	}
	return i
}

// fitMessage builds Kubernetes' FailedScheduling message:
//
//	0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu.
//
// Each node adds one to the count of each of its reasons; the "N reason"
// strings are sorted as strings and joined with ", ". A PreFilter
// rejection replaces the counts with its own message. postFilter (the
// preemption outcome, "preemption: ...") follows as its own sentence.
func fitMessage(res *CycleResult, postFilter string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", res.NumNodes)
	if res.PreFilterStatus != nil {
		fmt.Fprintf(&b, " %s.", res.PreFilterStatus.Message())
	} else {
		if !res.histDone { // postFilter asks again, with the same nodes
			res.hist, res.histDone = reasonHistogram(res.Nodes), true
		}
		b.WriteString(" " + res.hist + ".")
	}
	if postFilter != "" {
		fmt.Fprintf(&b, " %s.", postFilter)
	}
	return b.String()
}

// reasonHistogram counts nodes per reason: "1 node(s) ..., 2 Insufficient cpu".
func reasonHistogram(nodes []NodeFilterResult) string {
	// Filters share their Status values (one per reason), so most nodes
	// of a big cluster fall into a few statuses: count those first, by
	// pointer, then their reasons.
	// Neighbouring nodes mostly share one: count runs, then add each run
	// to the map (one map update per run, not per node).
	byStatus := map[*framework.Status]int{}
	for i := 0; i < len(nodes); {
		st, j := nodes[i].Status, i+1
		for j < len(nodes) && nodes[j].Status == st {
			j++
		}
		byStatus[st] += j - i
		i = j
	}
	counts := map[string]int{}
	for st, n := range byStatus {
		for _, reason := range st.Reasons() {
			counts[reason] += n
		}
	}
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
