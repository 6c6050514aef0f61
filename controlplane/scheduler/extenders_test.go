package scheduler

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	extv1 "k8s.io/kube-scheduler/extender/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// fakeExtender is an HTTP extender: filter rejects the nodes in reject,
// prioritize gives each node its score, bind records the binding, preempt
// keeps the nodes in keep. It records what it was asked.
type fakeExtender struct {
	mu       sync.Mutex
	reject   map[string]string
	scores   map[string]int64
	keep     map[string]bool
	bound    []string
	asked    []string
	srv      *httptest.Server
	failWith int // an HTTP status to answer everything with
}

func newFakeExtender(t *testing.T) *fakeExtender {
	e := &fakeExtender{reject: map[string]string{}, scores: map[string]int64{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.asked = append(e.asked, r.URL.Path)
		if e.failWith != 0 {
			w.WriteHeader(e.failWith)
			return
		}
		switch r.URL.Path {
		case "/sched/filter", "/sched/prioritize":
			var args extv1.ExtenderArgs
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil || args.Nodes == nil {
				http.Error(w, fmt.Sprint("bad args ", err), 400)
				return
			}
			if r.URL.Path == "/sched/prioritize" {
				var out extv1.HostPriorityList
				for _, n := range args.Nodes.Items {
					out = append(out, extv1.HostPriority{Host: n.Name, Score: e.scores[n.Name]})
				}
				_ = json.NewEncoder(w).Encode(out)
				return
			}
			items := args.Nodes.Items
			res := extv1.ExtenderFilterResult{FailedNodes: extv1.FailedNodesMap{}, Nodes: args.Nodes}
			res.Nodes.Items = nil
			for _, n := range items {
				if why, ok := e.reject[n.Name]; ok {
					res.FailedNodes[n.Name] = why
					continue
				}
				res.Nodes.Items = append(res.Nodes.Items, n)
			}
			_ = json.NewEncoder(w).Encode(res)
		case "/sched/preempt":
			var args extv1.ExtenderPreemptionArgs
			_ = json.NewDecoder(r.Body).Decode(&args)
			res := extv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extv1.MetaVictims{}}
			for node, v := range args.NodeNameToVictims {
				if !e.keep[node] {
					continue
				}
				mv := &extv1.MetaVictims{}
				for _, p := range v.Pods {
					mv.Pods = append(mv.Pods, &extv1.MetaPod{UID: string(p.UID)})
				}
				res.NodeNameToMetaVictims[node] = mv
			}
			_ = json.NewEncoder(w).Encode(res)
		case "/sched/bind":
			var args extv1.ExtenderBindingArgs
			_ = json.NewDecoder(r.Body).Decode(&args)
			e.bound = append(e.bound, args.PodNamespace+"/"+args.PodName+"@"+args.Node)
			_ = json.NewEncoder(w).Encode(extv1.ExtenderBindingResult{})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func extenderConfig(url, extra string) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: %s/sched
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
%s`, url, extra)
}

// An extender filters and scores beside the plugins: its rejection and
// its scores show in the explanation, and its scores change the choice.
func TestExtenderFilterAndPrioritize(t *testing.T) {
	e := newFakeExtender(t)
	e.reject["node-1"] = "node(s) had no free NVLink group"
	e.scores["node-3"] = 10
	f := newFixture(t, parseConfig(t, extenderConfig(e.srv.URL, "")), gpuNode("node-1", 8), gpuNode("node-2", 8), gpuNode("node-3", 8), gpuPod("p", 1))
	res := f.step()
	if res.SelectedNode != "node-3" {
		t.Fatalf("selected %q, want node-3 (the extender's best)\n%s", res.SelectedNode, Explain(res))
	}
	out := Explain(res)
	for _, want := range []string{
		"node-1  no      extender " + e.srv.URL + "/sched  node(s) had no free NVLink group",
		"extender " + e.srv.URL + "/sched",
		"10   100         5       500",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
	// The same table from the trace: what describe pod and trace pod print.
	tr, err := f.c.GetTrace(f.ctx, "gpu-demo", "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := api.ExplainSchedulingTrace("gpu-demo/p", tr.Spans); got != out {
		t.Errorf("trace's explanation differs:\n%s\n---\n%s", got, out)
	}
}

// Every node rejected by the extender: Kubernetes' FailedScheduling
// message counts its reasons.
func TestExtenderRejectsAll(t *testing.T) {
	e := newFakeExtender(t)
	e.reject["node-1"] = "no NVLink group"
	e.reject["node-2"] = "no NVLink group"
	f := newFixture(t, parseConfig(t, extenderConfig(e.srv.URL, "")), gpuNode("node-1", 8), gpuNode("node-2", 8), gpuPod("p", 1))
	res := f.step()
	if want := "0/2 nodes are available: 2 no NVLink group."; !strings.HasPrefix(res.Message, want) {
		t.Fatalf("message %q, want %q", res.Message, want)
	}
}

// An extender that cannot be reached: with ignorable: false the pod stays
// Pending, its PodScheduled condition SchedulerError with the error, as
// kube-scheduler; with ignorable: true it is scheduled without it.
func TestFailingExtender(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		ignorable bool
	}{{false}, {true}} {
		t.Run(fmt.Sprint("ignorable=", tc.ignorable), func(t *testing.T) {
			f := newFixture(t, parseConfig(t, extenderConfig(dead, fmt.Sprintf("  ignorable: %v\n", tc.ignorable))), gpuNode("node-1", 8), gpuPod("p", 1))
			f.step()
			p := f.pod("gpu-demo", "p")
			if tc.ignorable {
				if p.Spec.NodeName != "node-1" {
					t.Fatalf("an ignorable extender's failure kept the pod off node-1: %q", p.Spec.NodeName)
				}
				return
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("bound to %q despite the extender's failure", p.Spec.NodeName)
			}
			want := fmt.Sprintf(`Post "%s/sched/filter": dial tcp %s: connect: connection refused`, dead, strings.TrimPrefix(dead, "http://"))
			c := p.Status.Conditions
			if len(c) != 1 || c[0].Reason != ReasonSchedulerError || c[0].Message != want {
				t.Errorf("conditions %+v, want SchedulerError %q", c, want)
			}
			if evs := strings.Join(f.ev.take(), "\n"); !strings.Contains(evs, "FailedScheduling: "+want) {
				t.Errorf("events:\n%s", evs)
			}
		})
	}
}

// A bind extender interested in the pod (it manages a resource the pod
// asks for) binds it; others go through DefaultBinder.
func TestExtenderBindsItsPods(t *testing.T) {
	e := newFakeExtender(t)
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: %s/sched
  bindVerb: bind
  managedResources:
  - name: example.com/vgpu
    ignoredByScheduler: true
`, e.srv.URL)
	vgpu := gpuPod("v", 0, func(p *api.Pod) { p.Spec.Containers[0].Resources.Limits = rl("example.com/vgpu", "1") })
	f := newFixture(t, parseConfig(t, cfg), gpuNode("node-1", 8), vgpu, gpuPod("plain", 1))
	f.step()
	f.step()
	e.mu.Lock()
	bound := strings.Join(e.bound, ",")
	e.mu.Unlock()
	if bound != "gpu-demo/v@node-1" {
		t.Errorf("the extender bound %q, want only the vgpu pod (ignoredByScheduler let it past NodeResourcesFit)", bound)
	}
	if got, err := client.Get[*api.Pod](f.ctx, f.c, "gpu-demo", "plain"); err != nil || got.Spec.NodeName != "node-1" {
		t.Errorf("the plain pod: %v %v", got.Spec.NodeName, err)
	}
}

// A preempt extender narrows preemption's candidates: the node it keeps
// is nominated even where another would be the best choice.
func TestExtenderPreemption(t *testing.T) {
	e := newFakeExtender(t)
	e.keep = map[string]bool{"node-2": true}
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: %s/sched
  preemptVerb: preempt
`, e.srv.URL)
	f := newFixture(t, parseConfig(t, cfg), gpuNode("node-1", 1), gpuNode("node-2", 1),
		gpuPod("low", 1, onNode("node-1"), priority(1)), gpuPod("mid", 1, onNode("node-2"), priority(5)), gpuPod("high", 1, priority(100)))
	res := f.step()
	// Without the extender node-1 wins (its victim is the least important).
	if res.Nominated != "node-2" || len(res.Preemption.Victims) != 1 || res.Preemption.Victims[0].Key != "gpu-demo/mid" {
		t.Fatalf("nominated %q, preemption %+v", res.Nominated, res.Preemption)
	}
}
