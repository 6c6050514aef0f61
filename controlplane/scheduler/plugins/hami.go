package plugins

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// HAMiName is the plugin's name.
const HAMiName = "HAMi"

// HAMi's reasons for a card that does not fit (pkg/device/common), as its
// scheduler words them, counted over the node's cards: "2/2
// CardInsufficientMemory".
const (
	HAMiCardTypeMismatch                  = "CardTypeMismatch"
	HAMiCardUUIDMismatch                  = "CardUuidMismatch"
	HAMiCardNotHealth                     = "CardNotHealth"
	HAMiCardTimeSlicingExhausted          = "CardTimeSlicingExhausted"
	HAMiCardInsufficientMemory            = "CardInsufficientMemory"
	HAMiCardInsufficientCore              = "CardInsufficientCore"
	HAMiExclusiveDeviceAllocateConflict   = "ExclusiveDeviceAllocateConflict"
	HAMiCardComputeUnitsExhausted         = "CardComputeUnitsExhausted"
	HAMiAllocatedCardsInsufficientRequest = "AllocatedCardsInsufficientRequest"
	HAMiNodeInsufficientDevice            = "NodeInsufficientDevice"
	hamiScoreWeight                       = 10 // HAMi's policy.Weight
)

// HAMi is HAMi's vGPU scheduler (Project-HAMi/HAMi's scheduler extender)
// as a plugin: on a node whose agent registered its GPUs in HAMi's
// annotation (api.HAMiNodeRegister), a pod asking for nvidia.com/gpu gets
// that many cards, each with nvidia.com/gpumem MiB (or
// gpumem-percentage of the card) and nvidia.com/gpucores percent of its
// SMs, out of what the pods already there hold (their
// api.HAMiDevicesAllocated). On other nodes it does nothing (NVIDIA's
// plugin's nvidia.com/gpu, counted by NodeResourcesFit).
//
//   - Filter: HAMi's per-card checks in its order (type and UUID
//     annotations, health, slices left, memory, cores, exclusive use,
//     compute exhausted); a node that cannot fit says why in HAMi's words,
//     "N/CARDS REASON" joined by ", ". Cards are tried in the GPU policy's
//     order (hami.io/gpu-scheduler-policy: spread, the default, emptiest
//     card first; binpack fullest first) by HAMi's card score
//     10 × (slices/count + cores/100 + mem/total) including the pod.
//   - Score: HAMi's node score 10 × (slices/count + cores/total +
//     mem/total) over the node's cards with the pod placed, 0..30, as
//     0..100: binpack (hami.io/node-scheduler-policy, the default) prefers
//     the fuller node, spread the emptier.
//   - Reserve puts the decision on the assumed pod, so the next cycle
//     counts it; PreBind writes it on the pod (hami.io/vgpu-devices-to-
//     allocate and -allocated, hami.io/vgpu-node, hami.io/bind-phase
//     allocating), which the node's plugin reads when it allocates.
//
// What each node's cards hold is counted once per change of the node's
// pods or registration (hamiNodeCache), not per pod per node.
//
// Sums are int64: no pod's asks can overflow a card's.
type HAMi struct {
	client client.Interface
	mu     sync.Mutex
	nodes  map[string]*hamiNodeCache // by node name

	cfg      *client.Informer // ConfigMaps, for HAMi's device config (hami_config.go); nil without a client
	cfgInfs  *client.InformerFactory
	ownsCfg  bool // cfgInfs is the plugin's own (Run starts and waits for it)
	cfgReg   chan struct{}
	defaults atomic.Pointer[api.HAMiRequestDefaults]
	log      *slog.Logger
}

// hamiNodeCache is one node's registration, parsed, and what its cards
// hold, counted from the pods of the NodeInfo last seen: valid while the
// registration is the same string and the node's pods are the same
// PodInfos (the scheduler's cache replaces a PodInfo and its NodeInfo on
// any change; preemption's copies change their pods list). Counting is
// the cost of a HAMi Filter: decoding every pod's decision on every node
// for every pod (docs/performance.md).
type hamiNodeCache struct {
	raw   string
	devs  []api.HAMiNodeDevice // nil: does not parse
	pods  []*framework.PodInfo
	usage []hamiCard // per devs; nil until counted
}

var (
	_ framework.PreFilterPlugin   = (*HAMi)(nil)
	_ framework.FilterPlugin      = (*HAMi)(nil)
	_ framework.ScorePlugin       = (*HAMi)(nil)
	_ framework.ReservePlugin     = (*HAMi)(nil)
	_ framework.PreBindPlugin     = (*HAMi)(nil)
	_ framework.EnqueueExtensions = (*HAMi)(nil)
	_ framework.EventSourcePlugin = (*HAMi)(nil)
)

// NewHAMi returns the plugin; c writes the decision at PreBind and reads
// HAMi's device config, through an informer of its own.
func NewHAMi(c client.Interface, log *slog.Logger) *HAMi { return NewHAMiShared(c, nil, log) }

// NewHAMiShared is NewHAMi reading the device config from the ConfigMap
// informer of f (the scheduler's, or the process's shared factory; its
// client must be c); nil f: an informer of its own.
func NewHAMiShared(c client.Interface, f *client.InformerFactory, log *slog.Logger) *HAMi {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HAMi{client: c, nodes: map[string]*hamiNodeCache{}, log: log.With("plugin", HAMiName), cfgReg: make(chan struct{})}
	if c != nil {
		h.cfgInfs, h.ownsCfg = informersOf(c, f, h.log)
		h.cfg = h.cfgInfs.InformerFor(&api.ConfigMap{})
	}
	return h
}

// Name implements framework.Plugin.
func (*HAMi) Name() string { return HAMiName }

const hamiStateKey framework.StateKey = "HAMi"

type hamiState struct {
	reqs       []api.HAMiRequest // per container; Nums 0: none
	nodePolicy string
	gpuPolicy  string
	annos      map[string]string

	mu        sync.Mutex
	decisions map[string]hamiFit // by node; Score reads it without mu (see Score)
}

type hamiFit struct {
	pd    api.HAMiPodDevices
	score int64 // 0..100, higher is better for the pod's node policy
}

func (s *hamiState) Clone() framework.StateData { return s }

// hamiNode reports whether n registered its GPUs for HAMi.
func hamiNode(n *api.Node) bool {
	return n != nil && n.Annotations[api.HAMiNodeRegister] != ""
}

// hamiNodeInfo is hamiNode for a NodeInfo; most nodes are answered by
// the NodeInfo's annotation bits without reading the Node.
func hamiNodeInfo(ni *framework.NodeInfo) bool {
	return ni.MayHaveAnnotations(hamiRegisterBits) && hamiNode(ni.Node)
}

var hamiRegisterBits = framework.AnnotationBits(api.HAMiNodeRegister)

// PreFilter implements framework.PreFilterPlugin.
func (h *HAMi) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	st := &hamiState{annos: pod.Annotations, decisions: map[string]hamiFit{},
		nodePolicy: pod.Annotations[api.HAMiNodeSchedulerPolicy], gpuPolicy: pod.Annotations[api.HAMiGPUSchedulerPolicy]}
	d := h.requestDefaults()
	for i := range pod.Spec.Containers {
		st.reqs = append(st.reqs, api.HAMiRequestOf(&pod.Spec.Containers[i], d))
	}
	state.Write(hamiStateKey, st)
	if !st.asks() {
		return framework.NewStatus(framework.Skip) // no Filter per node; Score and Reserve read st
	}
	return nil
}

func hamiStateOf(state *framework.CycleState) *hamiState {
	d, ok := state.Read(hamiStateKey)
	if !ok {
		return nil
	}
	st, _ := d.(*hamiState)
	return st
}

func (st *hamiState) asks() bool {
	for _, r := range st.reqs {
		if r.Nums > 0 {
			return true
		}
	}
	return false
}

// hamiCard is one card's usage during a fit.
type hamiCard struct {
	dev                      *api.HAMiNodeDevice // the cache's: never changed
	used, usedMem, usedCores int64
}

// Filter implements framework.FilterPlugin.
func (h *HAMi) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) *framework.Status {
	st := hamiStateOf(state)
	if st == nil || !st.asks() || !hamiNodeInfo(ni) {
		return nil
	}
	cards, err := h.usage(ni)
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	pd := make(api.HAMiPodDevices, len(st.reqs))
	for i, r := range st.reqs {
		if r.Nums == 0 {
			continue
		}
		got, reason := fitContainer(cards, r, st.annos, st.gpuPolicy)
		if reason != "" {
			return framework.NewStatus(framework.Unschedulable, reason).WithDetails(explainCards(cards, r, st.annos, pod, i)...)
		}
		pd[i] = got
	}
	f := hamiFit{pd: pd, score: nodeScore(cards, st.nodePolicy)}
	st.mu.Lock()
	st.decisions[ni.Node.Name] = f
	st.mu.Unlock()
	return nil
}

// usage is the node's cards with what its pods hold: fresh copies the
// caller may change, from the node's cache when its registration and pods
// are those counted last.
func (h *HAMi) usage(ni *framework.NodeInfo) ([]hamiCard, error) {
	raw := ni.Node.Annotations[api.HAMiNodeRegister]
	h.mu.Lock()
	e := h.nodes[ni.Node.Name]
	h.mu.Unlock()
	if e == nil || e.raw != raw || e.usage == nil || !slices.Equal(e.pods, ni.Pods) {
		e = countHAMi(e, raw, ni.Pods)
		h.mu.Lock()
		h.nodes[ni.Node.Name] = e
		h.mu.Unlock()
	}
	if e.devs == nil {
		return nil, fmt.Errorf("node unregistered: %s does not parse", api.HAMiNodeRegister)
	}
	return slices.Clone(e.usage), nil
}

// countHAMi is a new cache entry for a node: its registration (parsed
// again only when it changed from old's) and what pods hold on its cards
// (api.HAMiUsage).
func countHAMi(old *hamiNodeCache, raw string, pods []*framework.PodInfo) *hamiNodeCache {
	e := &hamiNodeCache{raw: raw, pods: slices.Clone(pods)}
	if old != nil && old.raw == raw {
		e.devs = old.devs
	} else if devs, err := api.DecodeHAMiNodeDevices(raw); err == nil {
		e.devs = devs
	}
	usage := api.HAMiUsage(e.devs, func(yield func(*api.Pod) bool) {
		for _, pi := range pods {
			if !yield(pi.Pod) {
				return
			}
		}
	}, false)
	e.usage = make([]hamiCard, len(e.devs))
	for i, u := range usage {
		e.usage[i] = hamiCard{dev: &e.devs[i], used: u.Used, usedMem: u.UsedMem, usedCores: u.UsedCores}
	}
	return e
}

// explainCards is, beyond HAMi's counted reasons, each card's: its own
// reason, what is used, what container i of pod asks and the total
// (api.HAMiCardWhy), as `describe pod` shows them under the node.
func explainCards(cards []hamiCard, r api.HAMiRequest, annos map[string]string, pod *api.Pod, i int) []string {
	r.Coresreq = min(r.Coresreq, 100)
	out := []string{fmt.Sprintf("container %s asks %d card(s)", pod.Spec.Containers[i].Name, r.Nums)}
	for ci := range cards {
		c := &cards[ci]
		mem := memOf(r, c)
		u := api.HAMiCardUsage{Device: *c.dev, Used: c.used, UsedMem: c.usedMem, UsedCores: c.usedCores}
		out = append(out, api.HAMiCardWhy(ci, u, checkCard(c, r, mem, annos), mem, int64(r.Coresreq)))
	}
	return out
}

// memOf is what r asks of card c in MiB (HAMi's computeMemreq).
func memOf(r api.HAMiRequest, c *hamiCard) int64 {
	if r.Memreq > 0 {
		return int64(r.Memreq)
	}
	if r.MemPercentagereq != 101 {
		return int64(c.dev.Devmem) * int64(r.MemPercentagereq) / 100
	}
	return 0
}

// cardScore is HAMi's DeviceListsScore for r on c.
func cardScore(r api.HAMiRequest, c *hamiCard) float64 {
	f := func(a, b int64) float64 {
		if b <= 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return hamiScoreWeight * (f(int64(r.Nums)+c.used, int64(c.dev.Count)) +
		f(int64(r.Coresreq)+c.usedCores, int64(c.dev.Devcore)) + f(memOf(r, c)+c.usedMem, int64(c.dev.Devmem)))
}

// fitContainer is HAMi's Fit for one container: the cards tried in the
// GPU policy's order, each checked in HAMi's order; the chosen cards are
// counted in cards. reason is "" when it fits.
func fitContainer(cards []hamiCard, r api.HAMiRequest, annos map[string]string, policy string) ([]api.HAMiContainerDevice, string) {
	if int(r.Nums) > len(cards) {
		return nil, fmt.Sprintf("%d/%d %s", r.Nums, len(cards), HAMiNodeInsufficientDevice)
	}
	if r.Coresreq > 100 {
		r.Coresreq = 100 // HAMi: "core limit can't exceed 100"
	}
	type scored struct {
		c     *hamiCard
		score float64
	}
	order := make([]scored, len(cards))
	for i := range cards {
		order[i] = scored{&cards[i], cardScore(r, &cards[i])}
	}
	// HAMi sorts ascending for binpack and descending for spread, then
	// walks from the end: the first tried is the fullest for binpack,
	// the emptiest for spread. NUMA first, as HAMi.
	binpack := policy == api.HAMiPolicyBinpack
	slices.SortStableFunc(order, func(a, b scored) int {
		if a.c.dev.Numa != b.c.dev.Numa {
			if (a.c.dev.Numa > b.c.dev.Numa) == binpack {
				return -1
			}
			return 1
		}
		if binpack {
			return cmp.Compare(a.score, b.score)
		}
		return cmp.Compare(b.score, a.score)
	})
	reasons := map[string]int{}
	var got []api.HAMiContainerDevice
	var picked []*hamiCard
	need := r.Nums
	for i := len(order) - 1; i >= 0 && need > 0; i-- {
		c := order[i].c
		mem := memOf(r, c)
		if reason := checkCard(c, r, mem, annos); reason != "" {
			reasons[reason]++
			continue
		}
		need--
		picked = append(picked, c)
		got = append(got, api.HAMiContainerDevice{UUID: c.dev.ID, Type: api.HAMiDeviceType, Usedmem: int32(mem), Usedcores: r.Coresreq})
	}
	if need > 0 {
		if len(got) > 0 {
			reasons[HAMiAllocatedCardsInsufficientRequest] = len(got)
		}
		return nil, genReason(reasons, len(cards))
	}
	for i, c := range picked {
		c.used++
		c.usedMem += int64(got[i].Usedmem)
		c.usedCores += int64(got[i].Usedcores)
	}
	return got, ""
}

// checkCard is HAMi's card check pipeline; "" when c can take r.
func checkCard(c *hamiCard, r api.HAMiRequest, mem int64, annos map[string]string) string {
	switch {
	case !hamiTypeAllowed(annos, c.dev.Type):
		return HAMiCardTypeMismatch
	case !hamiUUIDAllowed(annos, c.dev.ID):
		return HAMiCardUUIDMismatch
	case !c.dev.Health:
		return HAMiCardNotHealth
	case int64(c.dev.Count) <= c.used:
		return HAMiCardTimeSlicingExhausted
	case int64(c.dev.Devmem)-c.usedMem < mem:
		return HAMiCardInsufficientMemory
	case int64(c.dev.Devcore)-c.usedCores < int64(r.Coresreq):
		return HAMiCardInsufficientCore
	case c.dev.Devcore == 100 && r.Coresreq == 100 && c.used > 0:
		return HAMiExclusiveDeviceAllocateConflict
	case c.dev.Devcore != 0 && c.usedCores == int64(c.dev.Devcore) && r.Coresreq == 0:
		return HAMiCardComputeUnitsExhausted
	}
	return ""
}

// hamiTypeAllowed is HAMi's checkGPUtype: nvidia.com/use-gputype and
// nouse-gputype list types matched, upper-cased, as substrings.
func hamiTypeAllowed(annos map[string]string, cardType string) bool {
	t := strings.ToUpper(cardType)
	match := func(list string) bool {
		for _, u := range strings.Split(list, ",") {
			if u = strings.TrimSpace(u); u != "" && strings.Contains(t, strings.ToUpper(u)) {
				return true
			}
		}
		return false
	}
	if use, ok := annos[api.HAMiUseGPUType]; ok && !match(use) {
		return false
	}
	if nouse, ok := annos[api.HAMiNoUseGPUType]; ok && match(nouse) {
		return false
	}
	return true
}

// hamiUUIDAllowed is HAMi's CheckUUID: use-gpuuuid wins over nouse-gpuuuid.
func hamiUUIDAllowed(annos map[string]string, id string) bool {
	if use, ok := annos[api.HAMiUseGPUUUID]; ok {
		return contains(strings.Split(use, ","), id)
	}
	if nouse, ok := annos[api.HAMiNoUseGPUUUID]; ok {
		return !contains(strings.Split(nouse, ","), id)
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

// genReason is HAMi's: "count/cards REASON" per reason, joined by ", "
// (sorted here, so the same cluster says the same words).
func genReason(reasons map[string]int, cards int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d/%d %s", reasons[k], cards, k)
	}
	return strings.Join(out, ", ")
}

// nodeScore is HAMi's NodeScore over cards (the pod counted), 0..30,
// scaled to 0..100 so that higher is better for policy: binpack (the
// default) the fuller node, spread the emptier.
func nodeScore(cards []hamiCard, policy string) int64 {
	var used, count, cores, totalCores, mem, totalMem int64
	for _, c := range cards {
		used += c.used
		count += int64(c.dev.Count)
		cores += c.usedCores
		totalCores += int64(c.dev.Devcore)
		mem += c.usedMem
		totalMem += int64(c.dev.Devmem)
	}
	f := func(a, b int64) float64 {
		if b <= 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	s := hamiScoreWeight * (f(used, count) + f(cores, totalCores) + f(mem, totalMem)) // 0..30
	scaled := min(max(int64(s*100/(3*hamiScoreWeight)), 0), framework.MaxNodeScore)
	if policy == api.HAMiPolicySpread {
		return framework.MaxNodeScore - scaled
	}
	return scaled
}

// Score implements framework.ScorePlugin: the node's HAMi score from Filter.
func (h *HAMi) Score(_ context.Context, state *framework.CycleState, _ *api.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	st := hamiStateOf(state)
	if st == nil || ni.Node == nil || !st.asks() {
		return 0, nil // a pod that asks for no vGPU has no decisions (Filter)
	}
	// Filter, which writes decisions under mu, has run on every node by
	// now (the scheduler scores only the nodes filtering found feasible,
	// after it), so Score, on many goroutines at once, only reads the map:
	// no lock, which every node's score took in turn.
	return st.decisions[ni.Name()].score, nil
}

// NormalizeScore implements framework.ScorePlugin: already 0..100.
func (*HAMi) NormalizeScore(context.Context, *framework.CycleState, *api.Pod, []framework.NodeScore) *framework.Status {
	return nil
}

func (st *hamiState) decision(node string) (api.HAMiPodDevices, bool) {
	if st == nil {
		return nil, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f, ok := st.decisions[node]
	return f.pd, ok
}

func withDecision(annos map[string]string, node string, pd api.HAMiPodDevices) map[string]string {
	out := maps.Clone(annos)
	if out == nil {
		out = map[string]string{}
	}
	enc := api.EncodeHAMiPodDevices(pd)
	out[api.HAMiDevicesToAllocate] = enc
	out[api.HAMiDevicesAllocated] = enc
	out[api.HAMiVGPUNode] = node
	out[api.HAMiBindPhase] = api.HAMiBindPhaseAllocating
	return out
}

// Reserve implements framework.ReservePlugin: the assumed pod carries the
// decision (pod is the scheduler's own copy), so the next cycle counts it.
func (h *HAMi) Reserve(_ context.Context, state *framework.CycleState, pod *api.Pod, node string) *framework.Status {
	pd, ok := hamiStateOf(state).decision(node)
	if !ok {
		return nil
	}
	pod.Annotations = withDecision(pod.Annotations, node, pd)
	return nil
}

// Unreserve implements framework.ReservePlugin: the assumed pod, with its
// decision, is forgotten by the scheduler.
func (*HAMi) Unreserve(context.Context, *framework.CycleState, *api.Pod, string) {}

// PreBind implements framework.PreBindPlugin: the decision is written on
// the pod before it is bound, so the node finds it.
func (h *HAMi) PreBind(ctx context.Context, state *framework.CycleState, pod *api.Pod, node string) *framework.Status {
	pd, ok := hamiStateOf(state).decision(node)
	if !ok {
		return nil
	}
	for range 5 {
		cur, err := client.Get[*api.Pod](ctx, h.client, pod.Namespace, pod.Name)
		if err != nil {
			return framework.AsStatus(err)
		}
		if cur.UID != pod.UID {
			return framework.AsStatus(fmt.Errorf("pod %s/%s was replaced", pod.Namespace, pod.Name))
		}
		cur.Annotations = withDecision(cur.Annotations, node, pd)
		if _, err = h.client.Update(ctx, cur); err == nil {
			return nil
		} else if !api.IsConflict(err) {
			return framework.AsStatus(err)
		}
	}
	return framework.AsStatus(fmt.Errorf("writing HAMi's decision on pod %s/%s: conflicts", pod.Namespace, pod.Name))
}

// EventsToRegister implements framework.EnqueueExtensions: a pod holding
// slices goes, or a HAMi node comes or registers anew.
func (*HAMi) EventsToRegister(context.Context) []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		ev(framework.AssignedPod, framework.Delete, func(_ *api.Pod, o, _ any) framework.QueueingHint {
			gone := asPod(o)
			return hint(gone == nil || api.PodHAMiDevices(gone) != nil)
		}),
		ev(framework.Node, framework.Add|framework.UpdateNodeAnnotation, func(_ *api.Pod, _, n any) framework.QueueingHint {
			return hint(hamiNode(asNode(n)))
		}),
	}
}
