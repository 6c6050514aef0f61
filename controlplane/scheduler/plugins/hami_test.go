package plugins

import (
	"context"
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/internal/testwait"
)

// hamiNodeOf is a node registered for HAMi with one card per memory size
// (UUIDs GPU-0, GPU-1, ...; 10 slices, 100 cores each).
func hamiNodeOf(name string, memMiB ...int32) *api.Node {
	var devs []api.HAMiNodeDevice
	for i, m := range memMiB {
		devs = append(devs, api.HAMiNodeDevice{ID: "GPU-" + string(rune('0'+i)), Count: 10, Devmem: m, Devcore: 100,
			Type: "NVIDIA-NVIDIA A100-SXM4-40GB", Health: true})
	}
	n := &api.Node{}
	n.Name = name
	n.Annotations = map[string]string{api.HAMiNodeRegister: api.EncodeHAMiNodeDevices(devs)}
	return n
}

// holding is a pod on the node holding cards as HAMi decided them.
func holding(name string, devs ...api.HAMiContainerDevice) *api.Pod {
	p := testPod(name)
	p.Annotations = map[string]string{api.HAMiDevicesAllocated: api.EncodeHAMiPodDevices(api.HAMiPodDevices{devs})}
	return p
}

func card(uuid string, mem, cores int32) api.HAMiContainerDevice {
	return api.HAMiContainerDevice{UUID: uuid, Type: api.HAMiDeviceType, Usedmem: mem, Usedcores: cores}
}

func slicePod(name string, annos map[string]string, kv ...string) *api.Pod {
	p := testPod(name, limits(kv...))
	p.Annotations = annos
	return p
}

func TestHAMiEncodings(t *testing.T) {
	devs := []api.HAMiNodeDevice{{ID: "GPU-a", Count: 10, Devmem: 40960, Devcore: 100, Type: "NVIDIA-NVIDIA A100-SXM4-40GB", Health: true}}
	s := api.EncodeHAMiNodeDevices(devs)
	if s != "GPU-a,10,40960,100,NVIDIA-NVIDIA A100-SXM4-40GB,0,true:" {
		t.Fatalf("registration %q", s)
	}
	back, err := api.DecodeHAMiNodeDevices(s)
	if err != nil || len(back) != 1 || back[0] != devs[0] {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	for _, bad := range []string{"GPU-a,10,x,100,T,0,true:", "GPU-a,10:", ",10,1,100,T,0,true:", "GPU-a,-1,1,100,T,0,true:"} {
		if _, err := api.DecodeHAMiNodeDevices(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	pd := api.HAMiPodDevices{{card("GPU-a", 3000, 30)}, nil}
	enc := api.EncodeHAMiPodDevices(pd)
	if enc != "GPU-a,NVIDIA,3000,30:;;" {
		t.Fatalf("decision %q", enc)
	}
	got, err := api.DecodeHAMiPodDevices(enc)
	if err != nil || len(got) != 2 || len(got[0]) != 1 || got[0][0] != pd[0][0] || len(got[1]) != 0 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := api.DecodeHAMiPodDevices("GPU-a,NVIDIA,3000,300:;"); err == nil {
		t.Error("cores over 100 decoded")
	}
}

func TestHAMiRequests(t *testing.T) {
	for _, tc := range []struct {
		kv   []string
		want api.HAMiRequest
	}{
		{[]string{"nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"}, api.HAMiRequest{Nums: 1, Memreq: 3000, MemPercentagereq: 101, Coresreq: 30}},
		{[]string{"nvidia.com/gpu", "2", "nvidia.com/gpumem-percentage", "50"}, api.HAMiRequest{Nums: 2, MemPercentagereq: 50}},
		{[]string{"nvidia.com/gpu", "1"}, api.HAMiRequest{Nums: 1, MemPercentagereq: 100}}, // the whole card's memory
		{[]string{"cpu", "1"}, api.HAMiRequest{}},
	} {
		p := testPod("p", limits(tc.kv...))
		if got := api.HAMiRequestOf(&p.Spec.Containers[0], api.HAMiRequestDefaults{}); got != tc.want {
			t.Errorf("%v: got %+v, want %+v", tc.kv, got, tc.want)
		}
	}
}

// HAMi's words for a node that cannot take the slice, counted over its cards.
func TestHAMiFilterReasons(t *testing.T) {
	h := NewHAMi(nil, nil)
	node := hamiNodeOf("n", 4096, 4096)
	full := nodeInfo(node, holding("a", card("GPU-0", 2000, 10)), holding("b", card("GPU-1", 2000, 10)))
	ask := []string{"nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"}
	checkStatus(t, runFilter(t, h, slicePod("p", nil, ask...), full), framework.Unschedulable, "2/2 CardInsufficientMemory")
	// Room on an empty node of the same cards.
	if s := runFilter(t, h, slicePod("p", nil, ask...), nodeInfo(node)); !s.IsSuccess() {
		t.Fatalf("empty node: %v", s.Message())
	}
	// Cores: two pods of 50 fill a card's SMs.
	cores := nodeInfo(hamiNodeOf("c", 40960), holding("a", card("GPU-0", 100, 50)), holding("b", card("GPU-0", 100, 50)))
	checkStatus(t, runFilter(t, h, slicePod("p", nil, ask...), cores), framework.Unschedulable, "1/1 CardInsufficientCore")
	// A card of another type; a UUID not allowed; two cards on a node of one.
	checkStatus(t, runFilter(t, h, slicePod("p", map[string]string{api.HAMiUseGPUType: "H100"}, ask...), nodeInfo(node)),
		framework.Unschedulable, "2/2 CardTypeMismatch")
	checkStatus(t, runFilter(t, h, slicePod("p", map[string]string{api.HAMiNoUseGPUType: "a100"}, ask...), nodeInfo(node)),
		framework.Unschedulable, "2/2 CardTypeMismatch")
	checkStatus(t, runFilter(t, h, slicePod("p", map[string]string{api.HAMiUseGPUUUID: "GPU-9"}, ask...), nodeInfo(node)),
		framework.Unschedulable, "2/2 CardUuidMismatch")
	checkStatus(t, runFilter(t, h, slicePod("p", nil, "nvidia.com/gpu", "3"), nodeInfo(node)),
		framework.Unschedulable, "3/2 NodeInsufficientDevice")
	// Two cards asked, one fits: the other's reason and the partial one.
	half := nodeInfo(node, holding("a", card("GPU-1", 2000, 10)))
	checkStatus(t, runFilter(t, h, slicePod("p", nil, "nvidia.com/gpu", "2", "nvidia.com/gpumem", "3000"), half),
		framework.Unschedulable, "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory")
	// A node not registered for HAMi is NVIDIA's plugin's: no opinion.
	plain := &api.Node{}
	plain.Name = "plain"
	if s := runFilter(t, h, slicePod("p", nil, ask...), nodeInfo(plain)); !s.IsSuccess() {
		t.Fatalf("plain node: %v", s.Message())
	}
}

// decide runs PreFilter, Filter, Score and Reserve on one node and returns
// the decision Reserve put on the pod, and the score.
func decide(t *testing.T, h *HAMi, pod *api.Pod, ni *framework.NodeInfo) (api.HAMiPodDevices, int64) {
	t.Helper()
	ctx, state := context.Background(), framework.NewCycleState()
	if s := h.PreFilter(ctx, state, pod); !s.IsSuccess() {
		t.Fatal(s.Message())
	}
	if s := h.Filter(ctx, state, pod, ni); !s.IsSuccess() {
		t.Fatalf("filter: %v", s.Message())
	}
	score, _ := h.Score(ctx, state, pod, ni)
	bound := *pod
	if s := h.Reserve(ctx, state, &bound, ni.Node.Name); !s.IsSuccess() {
		t.Fatal(s.Message())
	}
	if pod.Annotations[api.HAMiDevicesToAllocate] != "" {
		t.Fatal("Reserve changed the informer's pod")
	}
	pd, err := api.DecodeHAMiPodDevices(bound.Annotations[api.HAMiDevicesToAllocate])
	if err != nil || bound.Annotations[api.HAMiVGPUNode] != ni.Node.Name {
		t.Fatalf("decision %v: %v", bound.Annotations, err)
	}
	return pd, score
}

// GPU policy: spread (the default) takes the emptier card, binpack the
// fuller; node policy: binpack (the default) scores the fuller node higher.
func TestHAMiPolicies(t *testing.T) {
	h := NewHAMi(nil, nil)
	node := hamiNodeOf("n", 40960, 40960)
	busy := nodeInfo(node, holding("a", card("GPU-0", 10000, 20)))
	ask := []string{"nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"}
	pd, _ := decide(t, h, slicePod("p", nil, ask...), busy)
	if pd[0][0] != card("GPU-1", 3000, 30) {
		t.Fatalf("spread chose %+v", pd)
	}
	pd, _ = decide(t, h, slicePod("p", map[string]string{api.HAMiGPUSchedulerPolicy: "binpack"}, ask...), busy)
	if pd[0][0].UUID != "GPU-0" {
		t.Fatalf("binpack chose %+v", pd)
	}
	pd, _ = decide(t, h, slicePod("p", map[string]string{api.HAMiUseGPUUUID: "GPU-0"}, ask...), busy)
	if pd[0][0].UUID != "GPU-0" {
		t.Fatalf("use-gpuuuid GPU-0 chose %+v", pd)
	}
	// Percentage of the card's memory.
	pd, _ = decide(t, h, slicePod("p", nil, "nvidia.com/gpu", "1", "nvidia.com/gpumem-percentage", "25"), busy)
	if pd[0][0].Usedmem != 10240 {
		t.Fatalf("25%% of 40960 MiB: %+v", pd)
	}

	empty := nodeInfo(hamiNodeOf("e", 40960, 40960))
	_, sBusy := decide(t, h, slicePod("p", nil, ask...), busy)
	_, sEmpty := decide(t, h, slicePod("p", nil, ask...), empty)
	if sBusy <= sEmpty {
		t.Fatalf("binpack: busy node %d, empty node %d", sBusy, sEmpty)
	}
	spread := map[string]string{api.HAMiNodeSchedulerPolicy: "spread"}
	_, sBusy = decide(t, h, slicePod("p", spread, ask...), busy)
	_, sEmpty = decide(t, h, slicePod("p", spread, ask...), empty)
	if sBusy >= sEmpty {
		t.Fatalf("spread: busy node %d, empty node %d", sBusy, sEmpty)
	}
	// HAMi's node score: 10 × (1/20 + 30/200 + 3000/81920) = 2.366 of 30, 7.887 of 100.
	if want := int64(7); sEmpty != 100-want { // 7.887 truncated
		t.Fatalf("spread score of the empty node %d, want %d", sEmpty, 100-want)
	}
}

// Ten slices of a card are all it has, whatever memory is left.
func TestHAMiSlicesExhausted(t *testing.T) {
	h := NewHAMi(nil, nil)
	var pods []*api.Pod
	for i := range 10 {
		pods = append(pods, holding(string(rune('a'+i)), card("GPU-0", 100, 1)))
	}
	ni := nodeInfo(hamiNodeOf("n", 40960), pods...)
	checkStatus(t, runFilter(t, h, slicePod("p", nil, "nvidia.com/gpu", "1", "nvidia.com/gpumem", "100"), ni),
		framework.Unschedulable, "1/1 CardTimeSlicingExhausted")
}

// PreBind writes the decision on the pod the node will read.
func TestHAMiPreBind(t *testing.T) {
	pod := slicePod("p", map[string]string{"keep": "me"}, "nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000")
	pod.Namespace = "default"
	c := fake.New(pod)
	h := NewHAMi(c, nil)
	ctx, state := context.Background(), framework.NewCycleState()
	stored, err := c.Get(ctx, api.MustKindOf(pod), "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	pod = stored.(*api.Pod)
	ni := nodeInfo(hamiNodeOf("n", 40960))
	h.PreFilter(ctx, state, pod)
	if s := h.Filter(ctx, state, pod, ni); !s.IsSuccess() {
		t.Fatal(s.Message())
	}
	if s := h.PreBind(ctx, state, pod, "n"); !s.IsSuccess() {
		t.Fatal(s.Message())
	}
	got, err := c.Get(ctx, api.MustKindOf(pod), "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	a := got.(*api.Pod).Annotations
	if a[api.HAMiDevicesToAllocate] != "GPU-0,NVIDIA,3000,0:;" || a[api.HAMiDevicesAllocated] != a[api.HAMiDevicesToAllocate] ||
		a[api.HAMiVGPUNode] != "n" || a["keep"] != "me" {
		t.Fatalf("annotations %v", a)
	}
}

// The per-node cache of card usage follows what Filter is given: a fit
// does not leak into the cache (the same ask fits twice on an empty
// card), a pods list changed in place (preemption's copies) or a new
// registration is counted anew.
func TestHAMiUsageCache(t *testing.T) {
	h := NewHAMi(nil, nil)
	ask := []string{"nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000"}
	empty := nodeInfo(hamiNodeOf("n", 4096))
	for i := range 2 {
		if s := runFilter(t, h, slicePod("p", nil, ask...), empty); !s.IsSuccess() {
			t.Fatalf("empty card, try %d: %v", i, s.Message())
		}
	}
	ni := nodeInfo(hamiNodeOf("n", 4096), holding("a", card("GPU-0", 3000, 0)))
	checkStatus(t, runFilter(t, h, slicePod("p", nil, ask...), ni), framework.Unschedulable, "1/1 CardInsufficientMemory")
	if !ni.RemovePod(api.Key("default", "a")) {
		t.Fatal("pod a not on the node")
	}
	if s := runFilter(t, h, slicePod("p", nil, ask...), ni); !s.IsSuccess() {
		t.Fatalf("after removing a: %v", s.Message())
	}
	ni.AddPod(framework.NewPodInfo(holding("b", card("GPU-0", 2000, 0))))
	checkStatus(t, runFilter(t, h, slicePod("p", nil, ask...), ni), framework.Unschedulable, "1/1 CardInsufficientMemory")
	ni.SetNode(hamiNodeOf("n", 8192)) // the agent registered a bigger card
	if s := runFilter(t, h, slicePod("p", nil, ask...), ni); !s.IsSuccess() {
		t.Fatalf("after the new registration: %v", s.Message())
	}
	ni.SetNode(hamiNodeOf("n", 4096, 4096))
	ni.Node.Annotations[api.HAMiNodeRegister] = "GPU-0,10,bad,100,T,0,true:"
	checkStatus(t, runFilter(t, h, slicePod("p", nil, ask...), ni), framework.UnschedulableAndUnresolvable,
		"node unregistered: hami.io/node-nvidia-register does not parse")
}

// Beyond HAMi's counted reasons, a node that cannot take the pod says per
// GPU why: its reason, what is used, what is asked, the total. The
// reasons (FailedScheduling's words) stay HAMi's.
func TestHAMiFilterDetails(t *testing.T) {
	h := NewHAMi(nil, nil)
	ni := nodeInfo(hamiNodeOf("n", 4096, 4096), holding("a", card("GPU-0", 2000, 10)), holding("b", card("GPU-1", 1000, 90)))
	s := runFilter(t, h, slicePod("p", nil, "nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "20"), ni)
	checkStatus(t, s, framework.Unschedulable, "1/2 CardInsufficientCore, 1/2 CardInsufficientMemory")
	want := []string{
		"container c asks 1 card(s)",
		"GPU 0 (GPU-0): CardInsufficientMemory: memory 2000 used + 3000 asked > 4096 MiB; cores 10 used + 20 asked of 100%; slices 1 used + 1 of 10",
		"GPU 1 (GPU-1): CardInsufficientCore: memory 1000 used + 3000 asked of 4096 MiB; cores 90 used + 20 asked > 100%; slices 1 used + 1 of 10",
	}
	if !slices.Equal(s.Details(), want) {
		t.Errorf("details:\n%q\nwant\n%q", s.Details(), want)
	}
}

// HAMi's device config from its ConfigMap: defaultMemory and defaultCores
// for a container asking only nvidia.com/gpu, applied on change; a wrong
// config keeps the last good one; deleting it goes back to HAMi's
// defaults (the whole card, 0 cores).
func TestHAMiDeviceConfigDefaults(t *testing.T) {
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: api.HAMiDeviceConfigMap, Namespace: api.HAMiConfigNamespace},
		Data: map[string]string{api.HAMiDeviceConfigKey: "nvidia:\n  defaultMemory: 2000\n  defaultCores: 20\n"}}
	c := fake.New(cm)
	h := NewHAMi(c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	moved := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx, func() { moved <- struct{}{} }) }()
	defer func() { cancel(); <-done }()
	if !h.WaitForSync(ctx) {
		t.Fatal("no sync")
	}
	want := func(d api.HAMiRequestDefaults, r api.HAMiRequest) {
		t.Helper()
		if got := h.requestDefaults(); got != d {
			t.Fatalf("defaults %+v, want %+v", got, d)
		}
		p := testPod("p", limits("nvidia.com/gpu", "1"))
		pd, _ := decide(t, h, p, nodeInfo(hamiNodeOf("n", 40960)))
		if got := api.HAMiRequestOf(&p.Spec.Containers[0], h.requestDefaults()); got != r {
			t.Fatalf("request %+v, want %+v", got, r)
		}
		if r.Memreq > 0 && (pd[0][0].Usedmem != r.Memreq || pd[0][0].Usedcores != r.Coresreq) {
			t.Fatalf("decision %+v, want %+v", pd, r)
		}
	}
	want(api.HAMiRequestDefaults{Memory: 2000, Cores: 20}, api.HAMiRequest{Nums: 1, Memreq: 2000, MemPercentagereq: 101, Coresreq: 20})
	update := func(data map[string]string) {
		t.Helper()
		cm.Data = data
		if _, err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		cur, _ := c.Get(ctx, api.MustKindOf(cm), cm.Namespace, cm.Name)
		cm = cur.(*api.ConfigMap)
	}
	for len(moved) > 0 { // the initial list's
		<-moved
	}
	update(map[string]string{api.HAMiDeviceConfigKey: "nvidia:\n  defaultMemory: 3000\n"})
	testwait.Until(t, 5*time.Second, func() (bool, string) {
		return h.requestDefaults().Memory == 3000 && len(moved) > 0, "not applied, or the waiting pods not retried"
	})
	want(api.HAMiRequestDefaults{Memory: 3000}, api.HAMiRequest{Nums: 1, Memreq: 3000, MemPercentagereq: 101})
	// Wrong: kept (the informer's cache has it once Get sees it).
	update(map[string]string{api.HAMiDeviceConfigKey: "nvidia:\n  defaultCores: 300\n"})
	testwait.Until(t, 5*time.Second, func() (bool, string) {
		o, _ := h.cfg.Get(cm.Namespace, cm.Name)
		return o.GetObjectMeta().ResourceVersion == cm.ResourceVersion, "informer behind"
	})
	if h.loadConfig() {
		t.Fatal("a wrong config changed the defaults")
	}
	want(api.HAMiRequestDefaults{Memory: 3000}, api.HAMiRequest{Nums: 1, Memreq: 3000, MemPercentagereq: 101})
	if err := c.Delete(ctx, api.MustKindOf(cm), cm.Namespace, cm.Name, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, func() (bool, string) { return h.requestDefaults() == api.HAMiRequestDefaults{}, "not back to defaults" })
	want(api.HAMiRequestDefaults{}, api.HAMiRequest{Nums: 1, MemPercentagereq: 100})
}
