package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	klabels "k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

func gpusOn(c *Cache, node string) int64 {
	ni := c.NodeInfo(node)
	if ni == nil {
		return -1
	}
	return ni.Requested.Scalar[api.ResourceNvidiaGPU]
}

func TestCacheAssumeLifecycle(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCache(30 * time.Second)
	c.AddNode(gpuNode("n1", 8))
	snap := &Snapshot{}
	c.Snapshot(snap)
	before := snap.Get("n1")

	assume := func(name string) *framework.PodInfo {
		pi := framework.NewPodInfo(gpuPod(name, 2, onNode("n1")))
		if err := c.AssumePod(pi); err != nil {
			t.Fatal(err)
		}
		return pi
	}
	a := assume("a")
	if err := c.AssumePod(a); err == nil {
		t.Error("assumed twice")
	}
	if gpusOn(c, "n1") != 2 || before.Requested.Scalar[api.ResourceNvidiaGPU] != 0 {
		t.Fatalf("cache %d GPUs; an older snapshot must not change", gpusOn(c, "n1"))
	}

	// Confirmed by the informer: no longer assumed, counted once.
	c.AddPod(gpuPod("a", 2, onNode("n1")))
	if c.IsAssumed(a.Key) || gpusOn(c, "n1") != 2 {
		t.Fatalf("confirm: assumed=%v gpus=%d", c.IsAssumed(a.Key), gpusOn(c, "n1"))
	}
	c.ForgetPod(a.Key) // a confirmed pod is not forgotten
	if gpusOn(c, "n1") != 2 {
		t.Fatal("forgot a confirmed pod")
	}

	// Binding failed: forgotten.
	b := assume("b")
	c.ForgetPod(b.Key)
	if gpusOn(c, "n1") != 2 {
		t.Fatalf("forget: %d GPUs", gpusOn(c, "n1"))
	}

	// Bound but never confirmed: expires after the TTL.
	d := assume("d")
	c.FinishBinding(d.Key, now)
	if got := c.Cleanup(now.Add(29 * time.Second)); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	if got := c.Cleanup(now.Add(31 * time.Second)); len(got) != 1 || got[0].Key != d.Key || gpusOn(c, "n1") != 2 {
		t.Fatalf("cleanup: %v, %d GPUs", got, gpusOn(c, "n1"))
	}

	// A finished pod frees its GPUs.
	done := gpuPod("a", 2, onNode("n1"))
	done.Status.Phase = api.PodSucceeded
	c.AddPod(done)
	if gpusOn(c, "n1") != 0 {
		t.Fatalf("finished pod still counted: %d", gpusOn(c, "n1"))
	}
}

func TestCachePodBeforeNode(t *testing.T) {
	c := NewCache(time.Minute)
	c.AddPod(gpuPod("early", 1, onNode("late")))
	snap := &Snapshot{}
	c.Snapshot(snap)
	if len(snap.Nodes()) != 0 {
		t.Fatal("a node known only from its pods is in the snapshot")
	}
	c.AddNode(gpuNode("late", 1))
	c.AddNode(gpuNode("a-first", 1))
	c.Snapshot(snap)
	if len(snap.Nodes()) != 2 || snap.Nodes()[0].Node.Name != "a-first" || snap.Get("late").Requested.Scalar[api.ResourceNvidiaGPU] != 1 {
		t.Fatalf("snapshot %v", snap.Nodes())
	}
	c.RemoveNode("late")
	c.Snapshot(snap)
	if len(snap.Nodes()) != 1 || snap.Get("late") != nil {
		t.Fatal("removed node still in the snapshot")
	}
}

// CountMatching keeps its counts on the NodeInfos the cache publishes
// (framework/matchcount.go): whatever the cache goes through, each count a
// snapshot gives must be what a scan of the node's pods gives now, for
// counts asked before the change (the NodeInfos that did not change answer
// from memory) and after it.
func TestCountMatchingFollowsTheCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 9))
	c := NewCache(time.Minute)
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		c.AddNode(gpuNode(n, 8))
	}
	apps := []string{"web", "db", "cache"}
	sels := []klabels.Selector{klabels.Everything()}
	for _, a := range apps {
		sels = append(sels, klabels.SelectorFromSet(klabels.Set{"app": a}))
	}
	sels = append(sels, klabels.SelectorFromSet(klabels.Set{"app": "web", "tier": "front"}))
	scan := func(ni *framework.NodeInfo, ns string, sel klabels.Selector) int64 {
		var n int64
		for _, p := range ni.Pods {
			if p.Pod.Namespace == ns && p.Pod.DeletionTimestamp == nil && sel.Matches(klabels.Set(p.Pod.Labels)) {
				n++
			}
		}
		return n
	}
	check := func(step int, what string) {
		t.Helper()
		snap := &Snapshot{}
		c.Snapshot(snap)
		for _, ni := range snap.Nodes() {
			for _, ns := range []string{"a", "b"} {
				for _, sel := range sels {
					got, want := ni.CountMatching(ns, sel, framework.MatchKey(ns, sel)), scan(ni, ns, sel)
					if got != want {
						t.Fatalf("step %d (%s): %s in %s matching %q: counted %d, a scan finds %d", step, what, ni.Name(), ns, sel, got, want)
					}
				}
			}
		}
	}
	live := map[string]*api.Pod{}
	pod := func(i int) *api.Pod {
		p := gpuPod(fmt.Sprintf("p%d", i), 0, onNode(nodes[rng.IntN(len(nodes))]))
		p.Namespace = []string{"a", "b"}[rng.IntN(2)]
		p.Labels = map[string]string{"app": apps[rng.IntN(len(apps))]}
		if rng.IntN(2) == 0 {
			p.Labels["tier"] = "front"
		}
		return p
	}
	names := func() []string { return slices.Sorted(maps.Keys(live)) }
	for step := range 400 {
		check(step, "before")
		var what string
		switch op := rng.IntN(6); {
		case op <= 1 || len(live) == 0: // a new pod, bound
			p := pod(step)
			live[api.Key(p.Namespace, p.Name)] = p
			c.AddPod(p)
			what = "add " + p.Name
		case op == 2: // relabelled
			k := names()[rng.IntN(len(live))]
			p := api.Clone(live[k])
			p.Labels = map[string]string{"app": apps[rng.IntN(len(apps))]}
			live[k] = p
			c.AddPod(p)
			what = "relabel " + k
		case op == 3: // being deleted
			k := names()[rng.IntN(len(live))]
			p := api.Clone(live[k])
			now := api.Now()
			p.DeletionTimestamp = &now
			live[k] = p
			c.AddPod(p)
			what = "terminating " + k
		case op == 4: // gone
			k := names()[rng.IntN(len(live))]
			c.RemovePod(live[k])
			delete(live, k)
			what = "delete " + k
		default: // assumed, then (half the time) forgotten
			p := pod(step)
			pi := framework.NewPodInfo(p)
			if err := c.AssumePod(pi); err != nil {
				t.Fatal(err)
			}
			what = "assume " + p.Name
			if rng.IntN(2) == 0 {
				check(step, what)
				c.ForgetPod(pi.Key)
				what = "forget " + p.Name
			} else {
				live[pi.Key] = p
			}
		}
		check(step, what)
	}

	// A copy changed in place, as the nominated pods' view of a node is
	// made, counts its own pods, not the counts of the NodeInfo it copies.
	snap := &Snapshot{}
	c.Snapshot(snap)
	ni := snap.Get("n1")
	sel := klabels.SelectorFromSet(klabels.Set{"app": "web"})
	key := framework.MatchKey("a", sel)
	before := ni.CountMatching("a", sel, key)
	cp := ni.Clone()
	nominated := gpuPod("nominated", 0, onNode("n1"))
	nominated.Namespace, nominated.Labels = "a", map[string]string{"app": "web"}
	_ = cp.CountMatching("a", sel, key) // a count made before the change must not stay
	cp.AddPod(framework.NewPodInfo(nominated))
	if got := cp.CountMatching("a", sel, key); got != before+1 {
		t.Fatalf("copy with a nominated pod counts %d, want %d", got, before+1)
	}
	if got := ni.CountMatching("a", sel, key); got != before {
		t.Fatalf("the cache's NodeInfo counts %d after a copy changed, want %d", got, before)
	}
}

// A snapshot's counts of pods with affinity terms are the sums over its
// nodes (what SetNodes would count), through pods with and without terms
// added, assumed, forgotten and removed, on nodes added and removed, and
// on nodes known only through their pods (not counted).
func TestSnapshotCountsPodsWithAffinity(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	c := NewCache(time.Minute)
	withTerms := func(p *api.Pod, anti bool) *api.Pod {
		term := api.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}
		if anti {
			p.Spec.Affinity = &api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term}}}
		} else {
			p.Spec.Affinity = &api.Affinity{PodAffinity: &api.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term}}}}
		}
		return p
	}
	var pods []*api.Pod
	for step := range 2000 {
		node := fmt.Sprintf("n%d", rng.IntN(6))
		switch r := rng.IntN(10); {
		case r == 0:
			c.AddNode(gpuNode(node, 8))
		case r == 1:
			c.RemoveNode(node)
		case r < 6:
			p := gpuPod(fmt.Sprintf("p%d", step), 0, onNode(node))
			if k := rng.IntN(3); k > 0 {
				p = withTerms(p, k == 2)
			}
			if rng.IntN(2) == 0 {
				c.AddPod(p)
			} else if err := c.AssumePod(framework.NewPodInfo(p)); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		case r < 8 && len(pods) > 0:
			i := rng.IntN(len(pods))
			c.ForgetPod(api.Key(pods[i].Namespace, pods[i].Name))
			c.RemovePod(pods[i])
			pods = slices.Delete(pods, i, i+1)
		}
		snap := &Snapshot{}
		c.Snapshot(snap)
		var want framework.CycleState
		want.SetNodes(snap.Nodes())
		wa, wr := want.PodsWithAffinity()
		if snap.podsWithAffinity != wa || snap.podsWithRequiredAnti != wr {
			t.Fatalf("step %d: snapshot counts %d, %d; its nodes hold %d, %d", step, snap.podsWithAffinity, snap.podsWithRequiredAnti, wa, wr)
		}
	}
	snap := &Snapshot{}
	c.Snapshot(snap)
	if snap.podsWithAffinity == 0 || snap.podsWithRequiredAnti == 0 {
		t.Fatalf("the walk ended with no pod with terms on a node (%d, %d): it checks nothing", snap.podsWithAffinity, snap.podsWithRequiredAnti)
	}
}

// A snapshot brought up to date copies only what changed, and ends as a
// fresh one would: through nodes added, replaced and removed, pods
// assumed and forgotten, more changes between two snapshots than the
// cache keeps, and a snapshot moved to another cache.
func TestSnapshotUpToDateIsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	c, other := NewCache(time.Minute), NewCache(time.Minute)
	other.AddNode(gpuNode("x", 8))
	kept := &Snapshot{}
	incremental := 0
	for step := range 3000 {
		node := fmt.Sprintf("n%d", rng.IntN(40))
		changes, replaceOnly := 1, false
		switch rng.IntN(100) {
		case 0:
			changes = maxReplaced + rng.IntN(maxReplaced) // the kept snapshot falls behind the log
		case 1, 2, 3:
			// Replacements alone, fewer than the log keeps: the log is
			// trimmed between two snapshots that follow it.
			changes, replaceOnly = maxReplaced/4+rng.IntN(maxReplaced/2), true
		}
		for range changes {
			r := rng.IntN(20)
			if replaceOnly {
				r = 3
			}
			switch {
			case r == 0:
				c.RemoveNode(node)
			case r < 3:
				c.AddNode(gpuNode(node, 8))
			default:
				p := gpuPod(fmt.Sprintf("p%d-%d", step, rng.IntN(1<<20)), 1, onNode(node))
				if err := c.AssumePod(framework.NewPodInfo(p)); err == nil && rng.IntN(2) == 0 {
					c.ForgetPod(api.Key(p.Namespace, p.Name))
				}
			}
		}
		if rng.IntN(50) == 0 {
			other.Snapshot(kept) // another cache's: the next one copies all
		}
		before := kept.gen
		c.Snapshot(kept)
		fresh := &Snapshot{}
		c.Snapshot(fresh)
		if !slices.Equal(kept.nodes, fresh.nodes) {
			t.Fatalf("step %d: the snapshot brought up to date differs from a fresh one", step)
		}
		if kept.layout == fresh.layout && before >= c.replacedFrom && before != 0 {
			incremental++
		}
	}
	if incremental < 1000 {
		t.Fatalf("only %d of 3000 snapshots were brought up to date incrementally: the test checks little", incremental)
	}
}
