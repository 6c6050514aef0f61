package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

func rl(kv ...string) api.ResourceList {
	out := api.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resource.MustParse(kv[i+1])
	}
	return out
}

// gpuNode is a Ready node with 8 cpu, 32Gi and n GPUs.
func gpuNode(name string, gpus int, edit ...func(*api.Node)) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{api.LabelHostname: name}}}
	n.Status.Allocatable = rl("cpu", "8", "memory", "32Gi", "pods", "110")
	if gpus > 0 {
		n.Status.Allocatable[api.ResourceNvidiaGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	api.SetTypeMeta(n)
	for _, e := range edit {
		e(n)
	}
	return n
}

func labels(kv ...string) func(*api.Node) {
	return func(n *api.Node) {
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// gpuPod is a pending pod asking for n GPUs (limits only, as the course's YAML).
func gpuPod(name string, gpus int, edit ...func(*api.Pod)) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "gpu-demo", UID: "uid-" + name}}
	p.Spec.Containers = []api.Container{{Name: "cuda", Image: "nvidia/cuda:12.4.0-base-ubuntu22.04"}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	}
	p.Status.Phase = api.PodPending
	api.SetTypeMeta(p)
	for _, e := range edit {
		e(p)
	}
	return p
}

func onNode(node string) func(*api.Pod) { return func(p *api.Pod) { p.Spec.NodeName = node } }

func priority(v int32) func(*api.Pod) { return func(p *api.Pod) { p.Spec.Priority = &v } }

func cpu(q string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Containers[0].Resources.Requests = rl("cpu", q) }
}

// events records Events in memory.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Eventf(_ context.Context, obj api.Object, typ, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf("%s %s %s: %s", api.KeyOf(obj), typ, reason, fmt.Sprintf(format, args...)))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	return out
}

// fixture is a scheduler over a fake API, fed by calling its informer
// handlers directly: no informers, no goroutines, no sleeps.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	c     *fake.Client
	s     *Scheduler
	ev    *events
	clock time.Time
}

func newFixture(t testing.TB, cfg *config.Config, objs ...api.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), c: fake.New(objs...), ev: &events{}, clock: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)}
	s, err := New(f.c, cfg, Options{Recorder: f.ev, Now: func() time.Time { return f.clock }})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	// Feed the handlers what the API stores (defaulted), as an informer would.
	for _, o := range objs {
		switch o := o.(type) {
		case *api.Node:
			n, err := client.Get[*api.Node](f.ctx, f.c, "", o.Name)
			if err != nil {
				t.Fatal(err)
			}
			s.onNodeAdd(n)
		case *api.Pod:
			s.onPodAdd(f.pod(o.Namespace, o.Name))
		}
	}
	return f
}

// add creates a pod in the API and tells the handlers.
func (f *fixture) add(p *api.Pod) {
	f.t.Helper()
	if _, err := f.c.Create(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
	f.s.onPodAdd(f.pod(p.Namespace, p.Name))
}

// newDefaultScheduler is a scheduler with the default configuration that
// records its events in memory, and its one profile.
func newDefaultScheduler(t testing.TB) (*Scheduler, *profile) {
	t.Helper()
	s, err := New(fake.New(), config.Default(), Options{Recorder: &events{}})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.profiles[SchedulerName]
}

func defaultConfig(edit ...func(*config.Config)) *config.Config {
	c := config.Default()
	for _, e := range edit {
		e(c)
	}
	return c
}

// parseConfig reads a KubeSchedulerConfiguration for a test.
func parseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noPreemption disables DefaultPreemption in every profile, as a
// configuration's postFilter: disabled: [{name: DefaultPreemption}].
func noPreemption(c *config.Config) {
	for i := range c.Profiles {
		ps := &c.Profiles[i].Plugins.PostFilter
		ps.Disabled = append(ps.Disabled, v1.Plugin{Name: DefaultPreemptionName})
	}
}

// fitArgs sets NodeResourcesFit's scoring strategy in every profile.
func fitArgs(s v1.ScoringStrategy) func(*config.Config) {
	return func(c *config.Config) {
		for i := range c.Profiles {
			p := &c.Profiles[i]
			for j := range p.PluginConfig {
				if p.PluginConfig[j].Name == plugins.NodeResourcesFitName {
					p.PluginConfig[j].Args = &v1.NodeResourcesFitArgs{ScoringStrategy: &s}
				}
			}
		}
	}
}

// cycle pops the next active pod and runs its cycle; it reports the task
// without running it (nil when the queue is empty).
func (f *fixture) cycle() *task {
	f.t.Helper()
	qp, err := f.s.queue.TryPop()
	if err != nil || qp == nil {
		return nil
	}
	t := f.s.scheduleOne(f.ctx, qp)
	if t != nil && t.result != nil {
		// Tests read the result after its task ran (step returns it):
		// its arrays leave cycleBufPool, so the task's release keeps them.
		t.result.bufs = nil
	}
	return t
}

// step runs one cycle and its task, then delivers what the API changed
// about the pod to the handlers, as the informer would.
func (f *fixture) step() *CycleResult {
	f.t.Helper()
	t := f.cycle()
	if t == nil {
		return nil
	}
	f.finish(t)
	return t.result
}

func (f *fixture) finish(t *task) {
	f.t.Helper()
	f.s.runTask(f.ctx, t)
	f.sync(t.qp.Info.Pod)
}

// sync delivers the stored version of pod as an informer update.
func (f *fixture) sync(old *api.Pod) {
	f.t.Helper()
	cur, err := client.Get[*api.Pod](f.ctx, f.c, old.Namespace, old.Name)
	if api.IsNotFound(err) {
		f.s.onPodDelete(old)
		return
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.s.onPodUpdate(old, cur)
}

func (f *fixture) pod(ns, name string) *api.Pod {
	f.t.Helper()
	p, err := client.Get[*api.Pod](f.ctx, f.c, ns, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) nodeObj(name string) *api.Node {
	f.t.Helper()
	n, err := client.Get[*api.Node](f.ctx, f.c, "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) condition(p *api.Pod) api.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodScheduled {
			return c
		}
	}
	return api.PodCondition{}
}
