package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// The Kubernetes docs' examples of pod topology spread and inter-pod
// (anti-)affinity, unchanged (testdata/tutorials), in the clusters the
// docs draw, placed where the docs say.

// tutorialPods decodes a tutorial file into pending pods in namespace
// "default": a Pod as it is, a Deployment as its replicas.
func tutorialPods(t *testing.T, file string) []*api.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tutorials", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*api.Pod
	for _, d := range api.DecodeStream(data) {
		if d.Err != nil {
			t.Fatalf("%s: %v", file, d.Err)
		}
		if errs := api.Validate(d.Object); len(errs) > 0 {
			t.Fatalf("%s: %v", file, errs)
		}
		switch o := d.Object.(type) {
		case *api.Pod:
			o.Namespace, o.UID, o.Status.Phase = "default", "uid-"+o.Name, api.PodPending
			out = append(out, o)
		case *api.Deployment:
			for i := range *o.Spec.Replicas {
				p := &api.Pod{ObjectMeta: o.Spec.Template.ObjectMeta, Spec: o.Spec.Template.Spec}
				p.Name, p.Namespace, p.UID = fmt.Sprintf("%s-%d", o.Name, i), "default", fmt.Sprintf("uid-%s-%d", o.Name, i)
				p.Status.Phase = api.PodPending
				api.SetTypeMeta(p)
				out = append(out, p)
			}
		}
	}
	return out
}

// zoneNodes are the docs' nodes: node=NAME and zone=ZONE labels.
func zoneNodes(zones ...string) []api.Object {
	var out []api.Object
	for i, z := range zones {
		name := fmt.Sprintf("node%d", i+1)
		out = append(out, gpuNode(name, 0, labels("node", name, "zone", z)))
	}
	return out
}

// fooBar is an existing pod labelled foo: bar on node.
func fooBar(name, node string) *api.Pod {
	return gpuPod(name, 0, onNode(node), func(p *api.Pod) { p.Namespace, p.Labels = "default", map[string]string{"foo": "bar"} })
}

func TestTopologySpreadTutorials(t *testing.T) {
	fourNodes := zoneNodes("zoneA", "zoneA", "zoneB", "zoneB")
	threePods := []api.Object{fooBar("p1", "node1"), fooBar("p2", "node2"), fooBar("p3", "node3")}
	for _, tc := range []struct {
		name  string
		file  string
		edit  func(*api.Pod)
		objs  []api.Object
		nodes []string // where the docs say the pod may go; none: it stays Pending
		why   string   // the reason of the rejected nodes
	}{
		{name: "one constraint: zone B", file: "one-constraint.yaml", objs: append(fourNodes, threePods...),
			nodes: []string{"node3", "node4"}, why: plugins.ReasonTopologySpreadNotMatch},
		{name: "one constraint by node: node4", file: "one-constraint.yaml", objs: append(fourNodes, threePods...),
			edit: func(p *api.Pod) { p.Spec.TopologySpreadConstraints[0].TopologyKey = "node" }, nodes: []string{"node4"}},
		{name: "one constraint, maxSkew 2: zone A too", file: "one-constraint.yaml", objs: append(fourNodes, threePods...),
			edit: func(p *api.Pod) { p.Spec.TopologySpreadConstraints[0].MaxSkew = 2 }, nodes: []string{"node1", "node2", "node3", "node4"}},
		{name: "one constraint, ScheduleAnyway: zone B preferred", file: "one-constraint.yaml", objs: append(fourNodes, threePods...),
			edit: func(p *api.Pod) { p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = api.ScheduleAnyway }, nodes: []string{"node3", "node4"}},
		{name: "two constraints: node4", file: "two-constraints.yaml", objs: append(fourNodes, threePods...), nodes: []string{"node4"}},
		{name: "conflicting constraints: Pending", file: "two-constraints.yaml",
			objs: append(zoneNodes("zoneA", "zoneA", "zoneB"), fooBar("p1", "node1"), fooBar("p2", "node1"), fooBar("p3", "node2"), fooBar("p4", "node3"), fooBar("p5", "node3")),
			why:  "0/3 nodes are available: 3 " + plugins.ReasonTopologySpreadNotMatch + "."},
		{name: "node affinity keeps zone C out", file: "one-constraint-with-nodeaffinity.yaml",
			objs: append(zoneNodes("zoneA", "zoneA", "zoneB", "zoneB", "zoneC"), threePods...), nodes: []string{"node3", "node4"}},
		{name: "without node affinity zone C is the emptiest", file: "one-constraint.yaml",
			objs: append(zoneNodes("zoneA", "zoneA", "zoneB", "zoneB", "zoneC"), threePods...), nodes: []string{"node5"}},
		{name: "a node without the label", file: "one-constraint.yaml", objs: append(zoneNodes("zoneA"), gpuNode("unlabelled", 0)),
			nodes: []string{"node1"}, why: plugins.ReasonTopologyLabelMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tutorialPods(t, tc.file)[0]
			if tc.edit != nil {
				tc.edit(pod)
			}
			f := newFixture(t, defaultConfig(noPreemption), append(slices.Clone(tc.objs), pod)...)
			res := f.step()
			got := f.nodeOf("default", "mypod")
			if len(tc.nodes) == 0 {
				if got != "" || !strings.HasPrefix(res.Message, tc.why) {
					t.Fatalf("on %q, message %q; want Pending with %q\n%s", got, res.Message, tc.why, Explain(res))
				}
				return
			}
			if !slices.Contains(tc.nodes, got) {
				t.Fatalf("on %q, want one of %v\n%s", got, tc.nodes, Explain(res))
			}
			if tc.why != "" && !strings.Contains(Explain(res), tc.why) {
				t.Errorf("no node rejected with %q:\n%s", tc.why, Explain(res))
			}
		})
	}
}

func TestInterPodAffinityTutorials(t *testing.T) {
	zoned := func(name, zone string) *api.Node {
		return gpuNode(name, 0, labels(api.LabelTopologyZone, zone))
	}
	labelled := func(name, node, k, v string) *api.Pod {
		return gpuPod(name, 0, onNode(node), func(p *api.Pod) { p.Namespace, p.Labels = "default", map[string]string{k: v} })
	}
	t.Run("pod-with-pod-affinity", func(t *testing.T) {
		pod := tutorialPods(t, "pod-with-pod-affinity.yaml")[0]
		// Zone V holds a security=S1 pod and an S2 one; zone W an S1 pod only;
		// zone X nothing: required affinity picks V or W, the preferred
		// anti-affinity W.
		f := newFixture(t, defaultConfig(noPreemption), zoned("v1", "V"), zoned("w1", "W"), zoned("x1", "X"),
			labelled("s1-v", "v1", "security", "S1"), labelled("s2-v", "v1", "security", "S2"), labelled("s1-w", "w1", "security", "S1"), pod)
		res := f.step()
		if got := f.nodeOf("default", "with-pod-affinity"); got != "w1" {
			t.Fatalf("on %q, want w1\n%s", got, Explain(res))
		}
		if out := Explain(res); !strings.Contains(out, "x1    no      InterPodAffinity  "+plugins.ReasonAffinityRulesNotMatch) {
			t.Errorf("x1 not rejected by the affinity rules:\n%s", out)
		}
	})
	t.Run("no S1 pod anywhere: Pending", func(t *testing.T) {
		f := newFixture(t, defaultConfig(noPreemption), zoned("v1", "V"), zoned("w1", "W"), tutorialPods(t, "pod-with-pod-affinity.yaml")[0])
		if res := f.step(); res.Message != "0/2 nodes are available: 2 "+plugins.ReasonAffinityRulesNotMatch+"." {
			t.Errorf("message = %q", res.Message)
		}
	})
	t.Run("redis-cache and web-store", func(t *testing.T) {
		pods := tutorialPods(t, "redis-cache-web-store.yaml")
		nodes := []api.Object{gpuNode("node-1", 0), gpuNode("node-2", 0), gpuNode("node-3", 0)}
		f := newFixture(t, defaultConfig(noPreemption), nodes...)
		for _, p := range pods {
			f.add(p)
			f.step()
		}
		cacheOn, webOn := map[string]bool{}, map[string]bool{}
		for i := range 3 {
			cacheOn[f.nodeOf("default", fmt.Sprintf("redis-cache-%d", i))] = true
			webOn[f.nodeOf("default", fmt.Sprintf("web-server-%d", i))] = true
		}
		want := map[string]bool{"node-1": true, "node-2": true, "node-3": true}
		if !mapsEqual(cacheOn, want) || !mapsEqual(webOn, want) {
			t.Fatalf("caches on %v, web servers on %v: want one of each on every node", cacheOn, webOn)
		}
		// A fourth cache replica has no node left.
		extra := tutorialPods(t, "redis-cache-web-store.yaml")[0]
		extra.Name, extra.UID = "redis-cache-3", "uid-redis-cache-3"
		f.add(extra)
		if res := f.step(); res.Message != "0/3 nodes are available: 3 "+plugins.ReasonAntiAffinityRulesNotMatch+"." {
			t.Errorf("fourth replica: %q", res.Message)
		}
		// A pod the caches' anti-affinity matches, with no rules of its own.
		intruder := gpuPod("intruder", 0, func(p *api.Pod) { p.Namespace, p.Labels = "default", map[string]string{"app": "store"} })
		f.add(intruder)
		if res := f.step(); res.Message != "0/3 nodes are available: 3 "+plugins.ReasonExistingAntiAffinityNotMatch+"." {
			t.Errorf("intruder: %q", res.Message)
		}
	})
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Preemption sees through anti-affinity: evicting the low-priority pod
// that repels a high-priority one makes room.
func TestPreemptionWithAntiAffinity(t *testing.T) {
	low := gpuPod("low", 0, onNode("node-1"), priority(1), func(p *api.Pod) { p.Labels = map[string]string{"app": "db"} })
	high := gpuPod("high", 0, priority(1000), func(p *api.Pod) {
		p.Spec.Affinity = &api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
			LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: api.LabelHostname}}}}
	})
	f := newFixture(t, defaultConfig(), gpuNode("node-1", 0), low, high)
	res := f.step()
	if res.Nominated != "node-1" || res.Preemption == nil || len(res.Preemption.Victims) != 1 || res.Preemption.Victims[0].Key != "gpu-demo/low" {
		t.Fatalf("nominated %q, preemption %+v\n%s", res.Nominated, res.Preemption, Explain(res))
	}
}

// With no constraints of their own, a ReplicaSet's pods spread over nodes
// (the system default constraints: by hostname, maxSkew 3, ScheduleAnyway).
func TestDefaultSpreadOfReplicaSetPods(t *testing.T) {
	rs := &api.ReplicaSet{ObjectMeta: api.ObjectMeta{Name: "web-abc", Namespace: "gpu-demo", UID: "rs-uid"}}
	rs.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	rs.Spec.Template.Labels = map[string]string{"app": "web"}
	rs.Spec.Template.Spec.Containers = []api.Container{{Name: "web", Image: "nginx"}}
	api.SetTypeMeta(rs)
	checkDefaultSpread(t, rs, "web")
}

// A StatefulSet's pods spread as a ReplicaSet's do: Kubernetes'
// DefaultSelector takes the selector of the StatefulSet that controls a
// pod too.
func TestDefaultSpreadOfStatefulSetPods(t *testing.T) {
	ss := &api.StatefulSet{ObjectMeta: api.ObjectMeta{Name: "db", Namespace: "gpu-demo", UID: "ss-uid"}}
	ss.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	ss.Spec.ServiceName = "db"
	ss.Spec.Template.Labels = map[string]string{"app": "db"}
	ss.Spec.Template.Spec.Containers = []api.Container{{Name: "db", Image: "postgres"}}
	api.SetTypeMeta(ss)
	checkDefaultSpread(t, ss, "db")
}

// checkDefaultSpread places the third pod (app=app) that owner controls,
// its first two on node-a, and wants it on node-b.
func checkDefaultSpread(t *testing.T, owner api.Object, app string) {
	t.Helper()
	om := owner.GetObjectMeta()
	yes := true
	owned := func(name string) *api.Pod {
		return gpuPod(name, 0, cpu("100m"), func(p *api.Pod) {
			p.Labels = map[string]string{"app": app}
			p.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: owner.GetTypeMeta().Kind, Name: om.Name, UID: om.UID, Controller: &yes}}
		})
	}
	// node-a already runs two of them and has much more room left: spread
	// by LeastAllocated alone would put the third one there too.
	big := gpuNode("node-a", 0, func(n *api.Node) { n.Status.Allocatable = rl("cpu", "64", "memory", "256Gi", "pods", "110") })
	p1, p2 := owned(app+"-1"), owned(app+"-2")
	p1.Spec.NodeName, p2.Spec.NodeName = "node-a", "node-a"
	f := newFixture(t, defaultConfig(noPreemption), big, gpuNode("node-b", 0), owner, p1, p2)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, es := range f.s.sources {
		go es.Run(ctx, func() {})
		if !es.WaitForSync(ctx) {
			t.Fatal("informers did not sync")
		}
	}
	f.add(owned(app + "-3"))
	res := f.step()
	if got := f.nodeOf("gpu-demo", app+"-3"); got != "node-b" {
		t.Fatalf("third replica on %q, want node-b (spread)\n%s", got, Explain(res))
	}
	if _, err := client.Get[*api.Pod](f.ctx, f.c, "gpu-demo", app+"-3"); err != nil {
		t.Fatal(err)
	}
}
