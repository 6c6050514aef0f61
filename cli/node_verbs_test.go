package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// runNode is run with the commands Main adds (cluster_commands.go), where
// the node verbs are registered.
func runNode(t testing.TB, fc client.Interface, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	r := NewRoot(&out, &errb)
	r.AddCommand(r.clusterCommands()...)
	r.Now = func() time.Time { return testNow }
	r.NewClient = func() (client.Interface, error) { return fc, nil }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.Execute(ctx, args)
	return result{out: out.String(), err: errb.String(), code: ExitCode(err)}
}

func testNode(name string) *api.Node {
	n := &api.Node{ObjectMeta: meta("", name, time.Hour)}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	return n
}

func getNode(t testing.TB, fc client.Interface, name string) *api.Node {
	t.Helper()
	n, err := client.Get[*api.Node](t.Context(), fc, "", name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCordonUncordon(t *testing.T) {
	fc := newFake(testNode("n1"))
	steps := []struct {
		args    []string
		out     string
		unsched bool
	}{
		{[]string{"cordon", "n1"}, "node/n1 cordoned", true},
		{[]string{"cordon", "n1"}, "node/n1 already cordoned", true},
		{[]string{"uncordon", "n1"}, "node/n1 uncordoned", false},
		{[]string{"uncordon", "n1"}, "node/n1 already uncordoned", false},
	}
	for _, s := range steps {
		t.Run(strings.Join(s.args, " "), func(t *testing.T) {
			res := runNode(t, fc, s.args...)
			wantLines(t, res.out, s.out)
			if got := getNode(t, fc, "n1").Spec.Unschedulable; got != s.unsched {
				t.Errorf("unschedulable = %v", got)
			}
		})
	}
	res := runNode(t, fc, "cordon", "nope")
	if res.code != 1 || !strings.Contains(res.err, `nodes "nope" not found`) {
		t.Errorf("missing node: %+v", res)
	}
}

func TestTaint(t *testing.T) {
	fc := newFake(testNode("n1"))
	tests := []struct {
		name    string
		args    []string
		out     string
		errText string
		want    []api.Taint
	}{
		{"add", []string{"taint", "nodes", "n1", "gpu=a100:NoSchedule"}, "node/n1 tainted", "",
			[]api.Taint{{Key: "gpu", Value: "a100", Effect: "NoSchedule"}}},
		{"add second effect", []string{"taint", "node/n1", "gpu:NoExecute"}, "node/n1 tainted", "",
			[]api.Taint{{Key: "gpu", Value: "a100", Effect: "NoSchedule"}, {Key: "gpu", Effect: "NoExecute"}}},
		{"exists", []string{"taint", "nodes", "n1", "gpu=h100:NoSchedule"}, "",
			"error: node n1 already has gpu taint(s) with same effect(s) and --overwrite is false", nil},
		{"overwrite", []string{"taint", "nodes", "n1", "gpu=h100:NoSchedule", "--overwrite"}, "node/n1 tainted", "",
			[]api.Taint{{Key: "gpu", Value: "h100", Effect: "NoSchedule"}, {Key: "gpu", Effect: "NoExecute"}}},
		{"remove one effect", []string{"taint", "nodes", "n1", "gpu:NoExecute-"}, "node/n1 untainted", "",
			[]api.Taint{{Key: "gpu", Value: "h100", Effect: "NoSchedule"}}},
		{"bad effect", []string{"taint", "nodes", "n1", "gpu=x:Sometimes"}, "",
			"error: invalid taint spec: gpu=x:Sometimes, invalid taint effect: Sometimes, unsupported taint effect", nil},
		{"not found", []string{"taint", "nodes", "n1", "other-"}, "", `error: taint "other" not found`, nil},
		{"remove key", []string{"taint", "nodes", "n1", "gpu-"}, "node/n1 untainted", "", []api.Taint{}},
		{"not a node", []string{"taint", "pods", "web", "a=b:NoSchedule"}, "", "error: invalid resource type pods, only nodes are supported", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runNode(t, fc, tc.args...)
			if tc.errText != "" {
				if res.code != 1 || strings.TrimSpace(res.err) != tc.errText {
					t.Fatalf("got %+v, want error %q", res, tc.errText)
				}
				return
			}
			wantLines(t, res.out, tc.out)
			got := getNode(t, fc, "n1").Spec.Taints
			if len(got) != len(tc.want) {
				t.Fatalf("taints %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Key != tc.want[i].Key || got[i].Value != tc.want[i].Value || got[i].Effect != tc.want[i].Effect {
					t.Errorf("taint %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestLabel(t *testing.T) {
	fc := newFake(testNode("n1"), runningPod("default", "web", "n1", "10.0.0.5", time.Hour))
	tests := []struct {
		name    string
		args    []string
		out     string
		errText string
		node    map[string]string // the node's labels after, when set
	}{
		{"add", []string{"label", "nodes", "n1", "accel=a100"}, "node/n1 labeled", "", map[string]string{"accel": "a100"}},
		{"same value", []string{"label", "node/n1", "accel=a100"}, "node/n1 not labeled", "", map[string]string{"accel": "a100"}},
		{"refuse change", []string{"label", "nodes", "n1", "accel=h100"}, "", "error: 'accel' already has a value (a100), and --overwrite is false", nil},
		{"overwrite", []string{"label", "nodes", "n1", "accel=h100", "zone=b", "--overwrite"}, "node/n1 labeled", "", map[string]string{"accel": "h100", "zone": "b"}},
		{"remove", []string{"label", "nodes", "n1", "zone-"}, "node/n1 unlabeled", "", map[string]string{"accel": "h100"}},
		{"pod", []string{"label", "pods", "web", "tier=front"}, "pod/web labeled", "", nil},
		{"no labels", []string{"label", "nodes", "n1"}, "", "error: at least one label update is required", nil},
		{"invalid", []string{"label", "nodes", "n1", "a=b c"}, "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runNode(t, fc, tc.args...)
			if tc.name == "invalid" {
				if res.code != 1 || !strings.Contains(res.err, "invalid label spec: a=b c") {
					t.Fatalf("got %+v", res)
				}
				return
			}
			if tc.errText != "" {
				if res.code != 1 || strings.TrimSpace(res.err) != tc.errText {
					t.Fatalf("got %+v, want error %q", res, tc.errText)
				}
				return
			}
			wantLines(t, res.out, tc.out)
			if tc.node != nil {
				got := getNode(t, fc, "n1").Labels
				if len(got) != len(tc.node) {
					t.Fatalf("labels %v, want %v", got, tc.node)
				}
				for k, v := range tc.node {
					if got[k] != v {
						t.Errorf("labels %v, want %v", got, tc.node)
					}
				}
			}
		})
	}
	p, _ := client.Get[*api.Pod](t.Context(), fc, "default", "web")
	if p.Labels["tier"] != "front" || p.Labels["app"] != "web" {
		t.Errorf("pod labels %v", p.Labels)
	}
}

func TestDrain(t *testing.T) {
	owned := func(name, node string) *api.Pod {
		p := runningPod("default", name, node, "10.0.0.9", time.Hour)
		yes := true
		p.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: "rs-uid", Controller: &yes}}
		p.UID = "uid-" + name
		return p
	}
	bare := runningPod("default", "bare", "n1", "10.0.0.7", time.Hour)
	bare.UID = "uid-bare"

	t.Run("refuses bare pods", func(t *testing.T) {
		fc := newFake(testNode("n1"), owned("web-1", "n1"), bare)
		res := runNode(t, fc, "drain", "n1")
		if res.code != 1 {
			t.Fatalf("exit %d", res.code)
		}
		wantLines(t, res.out, "node/n1 cordoned")
		// kubectl 1.32's stderr, word for word (one reason: no brackets).
		// ("cannot delete" twice is kubectl 1.32's.)
		if want := `error: unable to drain node "n1" due to error: cannot delete cannot delete Pods that declare no controller (use --force to override): default/bare, continuing command...
There are pending nodes to be drained:
 n1
cannot delete cannot delete Pods that declare no controller (use --force to override): default/bare
`; res.err != want {
			t.Errorf("stderr:\n%s\nwant:\n%s", res.err, want)
		}
		if !getNode(t, fc, "n1").Spec.Unschedulable {
			t.Error("node not cordoned")
		}
		if _, err := client.Get[*api.Pod](t.Context(), fc, "default", "web-1"); err != nil {
			t.Errorf("owned pod deleted although the drain was refused: %v", err)
		}
	})
	t.Run("deletes owned pods", func(t *testing.T) {
		fc := newFake(testNode("n1"), testNode("n2"), owned("web-1", "n1"), owned("web-2", "n2"))
		res := runNode(t, fc, "drain", "n1", "--ignore-daemonsets", "--grace-period", "0", "--timeout", "5s")
		if res.code != 0 {
			t.Fatalf("%+v", res)
		}
		wantLines(t, res.out, "node/n1 cordoned", "evicting pod default/web-1", "pod/web-1 evicted", "node/n1 drained")
		if _, err := client.Get[*api.Pod](t.Context(), fc, "default", "web-1"); !api.IsNotFound(err) {
			t.Errorf("web-1 still there: %v", err)
		}
		if _, err := client.Get[*api.Pod](t.Context(), fc, "default", "web-2"); err != nil {
			t.Errorf("pod of another node deleted: %v", err)
		}
		for _, a := range fc.Actions() {
			if a.Verb == "delete" && a.Name != "web-1" {
				t.Errorf("unexpected %v", a)
			}
		}
	})
	t.Run("force", func(t *testing.T) {
		fc := newFake(testNode("n1"), bare)
		res := runNode(t, fc, "drain", "n1", "--force")
		if res.code != 0 {
			t.Fatalf("%+v", res)
		}
		wantContains(t, res.err, "Warning: deleting Pods that declare no controller: default/bare")
		wantLines(t, res.out, "node/n1 cordoned", "evicting pod default/bare", "pod/bare evicted", "node/n1 drained")
	})
	t.Run("timeout", func(t *testing.T) {
		// A finalizer keeps the pod after its delete: drain gives up at the deadline.
		p := owned("stuck", "n1")
		p.Finalizers = []string{"example.com/hold"}
		fc := newFake(testNode("n1"), p)
		res := runNode(t, fc, "drain", "n1", "--timeout", "50ms")
		if res.code != 1 || !strings.Contains(res.err, `drain did not complete within 50ms`) {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("daemonset pods", func(t *testing.T) {
		yes := true
		ds := &api.DaemonSet{ObjectMeta: meta("kube-system", "plugin", time.Hour)}
		ds.UID = "ds-uid"
		ds.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"name": "plugin"}}
		ds.Spec.Template.Labels = map[string]string{"name": "plugin"}
		ds.Spec.Template.Spec.Containers = []api.Container{{Name: "p", Image: "busybox"}}
		daemon := runningPod("kube-system", "plugin-x7k2p", "n1", "10.0.0.8", time.Hour)
		daemon.UID = "uid-daemon"
		daemon.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "plugin", UID: "ds-uid", Controller: &yes}}
		fc := newFake(testNode("n1"), ds, daemon, owned("web-1", "n1"))
		res := runNode(t, fc, "drain", "n1")
		if res.code != 1 || !strings.Contains(res.err, "due to error: cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): kube-system/plugin-x7k2p, continuing command...") {
			t.Fatalf("without --ignore-daemonsets: %+v", res)
		}
		// Two reasons: kubectl's aggregate, in brackets (kubectl's order is
		// a map's; skiff's the pods' order); each pod refused
		// by the first of kubectl's filters that refuses it.
		scratch := owned("scratch", "n1")
		scratch.OwnerReferences = nil
		scratch.Spec.Volumes = []api.Volume{{Name: "tmp", EmptyDir: &api.EmptyDirVolumeSource{}}}
		fc2 := newFake(testNode("n1"), ds, daemon, scratch)
		res = runNode(t, fc2, "drain", "n1")
		if res.code != 1 || !strings.Contains(res.err, "due to error: [cannot delete Pods with local storage (use --delete-emptydir-data to override): default/scratch, cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): kube-system/plugin-x7k2p], continuing command...") {
			t.Fatalf("two reasons: %+v", res)
		}
		res = runNode(t, fc2, "drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=5s")
		if res.code != 0 {
			t.Fatalf("%+v", res)
		}
		wantContains(t, res.err, "Warning: deleting Pods that declare no controller: default/scratch; ignoring DaemonSet-managed Pods: kube-system/plugin-x7k2p\n")
		res = runNode(t, fc, "drain", "n1", "--ignore-daemonsets", "--timeout=5s")
		if res.code != 0 {
			t.Fatalf("%+v", res)
		}
		wantContains(t, res.err, "Warning: ignoring DaemonSet-managed Pods: kube-system/plugin-x7k2p")
		wantLines(t, res.out, "node/n1 already cordoned", "evicting pod default/web-1", "pod/web-1 evicted", "node/n1 drained")
		if _, err := client.Get[*api.Pod](t.Context(), fc, "kube-system", "plugin-x7k2p"); err != nil {
			t.Errorf("the DaemonSet pod was removed: %v", err)
		}
	})
}

func TestDescribePodSchedulingTable(t *testing.T) {
	p := runningPod("default", "gpu-test", "", "", time.Minute)
	p.Status.Phase = api.PodPending
	fc := newFake(p)
	msg := "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable."
	if err := fc.AddTrace(t.Context(), "default", "gpu-test", api.TraceSpan{
		Component: "scheduler", Step: "filter", Message: msg,
		Start: api.MicroTime{Time: testNow}, End: api.MicroTime{Time: testNow},
		Details: map[string]any{
			"plugins": []any{"NodeUnschedulable", "NodeResourcesFit"},
			"nodes": []any{
				map[string]any{"node": "n1", "fit": false, "plugin": "NodeResourcesFit", "reasons": []any{"Insufficient nvidia.com/gpu"}},
				map[string]any{"node": "n2", "fit": false, "plugin": "NodeUnschedulable", "reasons": []any{"node(s) were unschedulable"}},
			},
			"total": 2, "evaluated": 2, "message": msg,
		},
	}); err != nil {
		t.Fatal(err)
	}
	res := run(t, fc, "", "describe", "pod", "gpu-test")
	wantContainsLoose(t, res.out,
		"Scheduling: (last attempt, from `skiff trace pod gpu-test`)",
		"filter: "+msg,
		"Pod gpu-test: 2 nodes, 2 looked at",
		"n1 no NodeResourcesFit Insufficient nvidia.com/gpu",
		"n2 no NodeUnschedulable node(s) were unschedulable",
		"Unschedulable: "+msg)
}
