package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// tableMetrics is a MetricsSource answering from a map: pod → value (milli).
type tableMetrics struct {
	pods map[string]int64
	err  error
}

func (m *tableMetrics) ResourceMetric(context.Context, string, labels.Selector, string, string) (podMetrics, error) {
	return nil, fmt.Errorf("no resource metrics in this test")
}

func (m *tableMetrics) PodsMetric(_ context.Context, _, metric string, _, _ labels.Selector) (podMetrics, error) {
	if m.err != nil {
		return nil, m.err
	}
	out := podMetrics{}
	for p, v := range m.pods {
		out[p] = podMetric{Value: v}
	}
	return out, nil
}

func (m *tableMetrics) ObjectMetric(context.Context, string, string, api.CrossVersionObjectReference, labels.Selector) (int64, error) {
	return 0, fmt.Errorf("no object metrics in this test")
}

func (m *tableMetrics) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, error) {
	return nil, fmt.Errorf("no external metrics in this test")
}

func gpuHPA() *api.HorizontalPodAutoscaler {
	q := resource.MustParse("70")
	h := &api.HorizontalPodAutoscaler{
		ObjectMeta: api.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-hpa", Generation: 1},
		Spec: api.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: api.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    5,
			Metrics: []api.MetricSpec{{Type: api.PodsMetricSourceType, Pods: &api.PodsMetricSource{
				Metric: api.MetricIdentifier{Name: "DCGM_FI_DEV_GPU_UTIL"}, Target: api.MetricTarget{Type: api.AverageValueMetricType, AverageValue: &q}}}},
		},
	}
	api.SetTypeMeta(h)
	api.SetDefaults(h)
	return h
}

func runningPod(name string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "x"}}}}
	p.Status.Phase = api.PodRunning
	p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}
	api.SetTypeMeta(p)
	return p
}

func hpaCondition(h *api.HorizontalPodAutoscaler, typ string) string {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c.Status + " " + c.Reason
		}
	}
	return "none"
}

// TestHPAControllerGPUScaleUpAndDown: the course's homework on the fake
// client: pods at 90 against 70 go from 2 to 3 with Kubernetes' event and
// conditions; within the sync period nothing is done again; when the load
// stops the count stays during the downscale window and falls to
// minReplicas after it.
func TestHPAControllerGPUScaleUpAndDown(t *testing.T) {
	ctx := context.Background()
	d := deployment(2, "gpu-load")
	c := fake.New(d, gpuHPA(), runningPod("web-a"), runningPod("web-b"))
	ev := &events{}
	m := &tableMetrics{pods: map[string]int64{"web-a": 90000, "web-b": 90000}}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, m, ev,
		HPAConfig{SyncPeriod: 15 * time.Second, DownscaleStabilization: 30 * time.Second}, nil)
	clock := t0
	r.calc.now = func() time.Time { return clock }
	key := ns + "/web"

	requeue := func(err error) time.Duration {
		t.Helper()
		var ra *client.RequeueAfterError
		if !errors.As(err, &ra) {
			t.Fatalf("reconcile: %v, want a requeue after the sync period", err)
		}
		return ra.After
	}
	if after := requeue(r.Reconcile(ctx, key)); after != 15*time.Second {
		t.Errorf("requeue after %v, want the 15s sync period", after)
	}
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 3 {
		t.Fatalf("replicas %d, want ceil(2 × 90/70) = 3", *got.Spec.Replicas)
	}
	if got := ev.take(); len(got) != 1 || got[0] != "Normal SuccessfulRescale New size: 3; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target" {
		t.Errorf("events %q", got)
	}
	h := get[*api.HorizontalPodAutoscaler](t, c, ns, "web")
	for typ, want := range map[string]string{api.AbleToScale: "True SucceededRescale", api.ScalingActive: "True ValidMetricFound", api.ScalingLimited: "False DesiredWithinRange"} {
		if got := hpaCondition(h, typ); got != want {
			t.Errorf("%s: %s, want %s", typ, got, want)
		}
	}
	if h.Status.CurrentReplicas != 2 || h.Status.DesiredReplicas != 3 || h.Status.LastScaleTime == nil ||
		h.Status.CurrentMetrics[0].Pods.Current.AverageValue.String() != "90" {
		t.Errorf("status %+v", h.Status)
	}

	// Its own status write comes back at once: nothing is done before the period.
	writes(c)
	clock = t0.Add(time.Second)
	if after := requeue(r.Reconcile(ctx, key)); after != 14*time.Second {
		t.Errorf("early reconcile: requeue after %v, want the rest of the period (14s)", after)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("early reconcile wrote %q", w)
	}

	// The load stops (a third pod came with the scale).
	if _, err := c.Create(ctx, runningPod("web-c")); err != nil {
		t.Fatal(err)
	}
	m.pods = map[string]int64{"web-a": 0, "web-b": 0, "web-c": 0}
	clock = t0.Add(15 * time.Second)
	requeue(r.Reconcile(ctx, key))
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 3 {
		t.Fatalf("scaled down to %d inside the stabilization window", *got.Spec.Replicas)
	}
	h = get[*api.HorizontalPodAutoscaler](t, c, ns, "web")
	if got := hpaCondition(h, api.AbleToScale); got != "True ScaleDownStabilized" {
		t.Errorf("AbleToScale %s, want ScaleDownStabilized", got)
	}
	clock = t0.Add(50 * time.Second)
	requeue(r.Reconcile(ctx, key))
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 1 {
		t.Fatalf("replicas %d after the window, want minReplicas 1", *got.Spec.Replicas)
	}
	if got := ev.take(); len(got) != 1 || got[0] != "Normal SuccessfulRescale New size: 1; reason: All metrics below target" {
		t.Errorf("events %q", got)
	}
	h = get[*api.HorizontalPodAutoscaler](t, c, ns, "web")
	if got := hpaCondition(h, api.ScalingLimited); got != "True TooFewReplicas" {
		t.Errorf("ScalingLimited %s, want True TooFewReplicas (desired 0 < min 1)", got)
	}
	if d := r.Decisions(key); len(d) != 3 || !strings.Contains(d[0], "web-a=90") || !strings.Contains(d[0], "ratio 1.286") || !strings.Contains(d[1], "ScaleDownStabilized") || !strings.Contains(d[2], "scaled 3 -> 1") {
		t.Errorf("decisions %q", d)
	}
}

// TestHPAControllerMetricFailure: every metric failing leaves the count,
// sets ScalingActive False with the metric's reason and warns.
func TestHPAControllerMetricFailure(t *testing.T) {
	ctx := context.Background()
	c := fake.New(deployment(2, "x"), gpuHPA(), runningPod("web-a"), runningPod("web-b"))
	ev := &events{}
	m := &tableMetrics{err: fmt.Errorf("the server could not find the requested resource")}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, m, ev, HPAConfig{}, nil)
	_ = r.Reconcile(ctx, ns+"/web")
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 2 {
		t.Errorf("replicas changed to %d", *got.Spec.Replicas)
	}
	h := get[*api.HorizontalPodAutoscaler](t, c, ns, "web")
	if got := hpaCondition(h, api.ScalingActive); got != "False FailedGetPodsMetric" {
		t.Errorf("ScalingActive %s", got)
	}
	got := strings.Join(ev.take(), "\n")
	for _, want := range []string{"Warning FailedGetPodsMetric failed to get pods metric value: the server could not find the requested resource", "Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get pods metric value"} {
		if !strings.Contains(got, want) {
			t.Errorf("events lack %q:\n%s", want, got)
		}
	}
	// The decision says the count stayed (the status's desired count is
	// still its first 0, as Kubernetes leaves it: not a decision to 0).
	tr, err := c.GetObjectTrace(ctx, hpaKind(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if ds := api.HPADecisions(tr.Spans); len(ds) != 1 || ds[0].CurrentReplicas != 2 || ds[0].DesiredReplicas != 2 || ds[0].Rescaled {
		t.Errorf("decisions %+v, want one: 2 -> 2, not rescaled", ds)
	}
	if section := api.DescribeHPADecisions("web", tr.Spans, 10); !strings.Contains(section, "2 -> 2 replicas") || strings.Contains(section, "-> 0 replicas") {
		t.Errorf("describe's section:\n%s", section)
	}
}

// TestHPAControllerBounds: a target above maxReplicas comes down to it
// whatever the metrics; a missing target is FailedGetScale.
func TestHPAControllerBounds(t *testing.T) {
	ctx := context.Background()
	c := fake.New(deployment(8, "x"), gpuHPA())
	ev := &events{}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, &tableMetrics{}, ev, HPAConfig{}, nil)
	_ = r.Reconcile(ctx, ns+"/web")
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 5 {
		t.Errorf("replicas %d, want maxReplicas 5", *got.Spec.Replicas)
	}
	if got := ev.take(); len(got) != 1 || got[0] != "Normal SuccessfulRescale New size: 5; reason: Current number of replicas above Spec.MaxReplicas" {
		t.Errorf("events %q", got)
	}

	h := gpuHPA()
	h.Name, h.Spec.ScaleTargetRef.Name = "other", "missing"
	if _, err := c.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	_ = r.Reconcile(ctx, ns+"/other")
	got := get[*api.HorizontalPodAutoscaler](t, c, ns, "other")
	if s := hpaCondition(got, api.AbleToScale); s != "False FailedGetScale" {
		t.Errorf("AbleToScale %s, want False FailedGetScale", s)
	}
}

// cpuMetrics answers metrics.k8s.io's pod cpu from a map: pod → millicores,
// sampled at the controller's clock over a 10 s window (the agent's).
type cpuMetrics struct {
	tableMetrics
	cpu map[string]int64
	now *time.Time
}

func (m *cpuMetrics) ResourceMetric(_ context.Context, _ string, _ labels.Selector, res, _ string) (podMetrics, error) {
	if res != "cpu" {
		return nil, fmt.Errorf("unable to get metrics for resource %s: no metrics returned from resource metrics API", res)
	}
	out := podMetrics{}
	for p, v := range m.cpu {
		out[p] = podMetric{Value: v, Timestamp: *m.now, Window: 10 * time.Second}
	}
	return out, nil
}

// phpApachePod is a replica of the walkthrough's php-apache: requests cpu
// 200m, limits 500m, started long enough ago that its cpu counts (the
// initialization period is behind it).
func phpApachePod(name string, started time.Time) *api.Pod {
	p := runningPod(name)
	p.Spec.Containers[0].Resources.Requests = api.ResourceList{api.ResourceCPU: resource.MustParse("200m")}
	p.Spec.Containers[0].Resources.Limits = api.ResourceList{api.ResourceCPU: resource.MustParse("500m")}
	p.Status.StartTime = &api.Time{Time: started}
	p.Status.Conditions[0].LastTransitionTime = api.Time{Time: started}
	return p
}

// createRunning creates p and writes its status, as its node would.
func createRunning(t *testing.T, c client.Interface, p *api.Pod) {
	t.Helper()
	created, err := c.Create(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	cp := created.(*api.Pod)
	cp.Status = p.Status
	if _, err := c.UpdateStatus(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
}

// TestHPAControllerPHPApacheWalkthrough is the Kubernetes docs' HPA
// walkthrough at the controller (the same on real cgroups is not run
// here: see docs/labs.md): `kubectl autoscale deployment php-apache
// --cpu-percent=50 --min=1 --max=10` makes an autoscaling/v2 autoscaler
// without a behavior; the load generator drives the one pod to 305 % of
// its request. The legacy rate limit takes it to 4 first (ScaleUpLimit),
// the same load spread over 4 pods then asks for 7, the docs' count; when
// the load stops the count holds for the 5 minute window and then falls
// to 1.
func TestHPAControllerPHPApacheWalkthrough(t *testing.T) {
	ctx := context.Background()
	min1 := int32(1)
	h := &api.HorizontalPodAutoscaler{
		ObjectMeta: api.ObjectMeta{Name: "php-apache", Namespace: ns, UID: "uid-php", Generation: 1},
		Spec: api.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: api.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &min1, MaxReplicas: 10,
			Metrics: []api.MetricSpec{{Type: api.ResourceMetricSourceType, Resource: &api.ResourceMetricSource{
				Name: "cpu", Target: api.MetricTarget{Type: api.UtilizationMetricType, AverageUtilization: ptr(int32(50))}}}},
		},
	}
	api.SetTypeMeta(h)
	api.SetDefaults(h)
	if h.Spec.Behavior != nil {
		t.Fatalf("autoscale's object has a behavior after defaulting: %+v", h.Spec.Behavior)
	}
	clock := t0
	c := fake.New(deployment(1, "php-apache"), h, phpApachePod("web-0", t0.Add(-10*time.Minute)))
	ev := &events{}
	m := &cpuMetrics{cpu: map[string]int64{"web-0": 610}, now: &clock}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, m, ev, DefaultHPAConfig(), nil)
	r.calc.now = func() time.Time { return clock }
	key := ns + "/php-apache"
	sync := func(at time.Duration) (*api.HorizontalPodAutoscaler, int32) {
		t.Helper()
		clock = t0.Add(at)
		_ = r.Reconcile(ctx, key)
		return get[*api.HorizontalPodAutoscaler](t, c, ns, "php-apache"), *get[*api.Deployment](t, c, ns, "web").Spec.Replicas
	}

	got, n := sync(0)
	if n != 4 || hpaCondition(got, api.ScalingLimited) != "True ScaleUpLimit" {
		t.Fatalf("1 pod at 305%%: replicas %d, ScalingLimited %s; want 4 (ceil(1 × 305/50) = 7 limited to max(2 × 1, 4))", n, hpaCondition(got, api.ScalingLimited))
	}
	if u := got.Status.CurrentMetrics[0].Resource.Current; *u.AverageUtilization != 305 || u.AverageValue.String() != "610m" {
		t.Errorf("current cpu %d%% (%s), want 305%% (610m) as kubectl get hpa shows cpu: 305%%/50%%", *u.AverageUtilization, u.AverageValue.String())
	}
	if e := ev.take(); len(e) != 1 || e[0] != "Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target" {
		t.Errorf("events %q", e)
	}

	m.cpu = map[string]int64{}
	for i := range 4 { // the same load, spread by the Service
		name := fmt.Sprintf("web-%d", i)
		if i > 0 {
			createRunning(t, c, phpApachePod(name, t0.Add(-10*time.Minute)))
		}
		m.cpu[name] = 610 / 4
	}
	got, n = sync(15 * time.Second)
	if n != 7 || hpaCondition(got, api.ScalingLimited) != "False DesiredWithinRange" {
		t.Fatalf("4 pods at 76%%: replicas %d, ScalingLimited %s; want ceil(4 × 76/50) = 7; decisions %q", n, hpaCondition(got, api.ScalingLimited), r.Decisions(key))
	}

	for i := 4; i < 7; i++ {
		name := fmt.Sprintf("web-%d", i)
		createRunning(t, c, phpApachePod(name, t0.Add(-10*time.Minute)))
	}
	for i := range 7 { // the load generator stopped
		m.cpu[fmt.Sprintf("web-%d", i)] = 0
	}
	got, n = sync(30 * time.Second)
	if n != 7 || hpaCondition(got, api.AbleToScale) != "True ScaleDownStabilized" {
		t.Fatalf("load stopped: replicas %d, AbleToScale %s; want 7 held by the 5 minute window", n, hpaCondition(got, api.AbleToScale))
	}
	_, n = sync(5*time.Minute + 20*time.Second)
	if n != 1 {
		t.Fatalf("after the window: replicas %d, want 1", n)
	}
	if e := ev.take(); len(e) != 2 || e[1] != "Normal SuccessfulRescale New size: 1; reason: All metrics below target" {
		t.Errorf("events %q", e)
	}
}

// TestHPAControllerTargetAtZero: without the HPAScaleToZero gate a target
// scaled to 0 by hand is left there (Kubernetes: autoscaling is disabled
// for it), whatever its metrics say.
func TestHPAControllerTargetAtZero(t *testing.T) {
	ctx := context.Background()
	c := fake.New(deployment(0, "x"), gpuHPA())
	ev := &events{}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, &tableMetrics{pods: map[string]int64{"web-a": 90000}}, ev, DefaultHPAConfig(), nil)
	_ = r.Reconcile(ctx, ns+"/web")
	if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != 0 {
		t.Errorf("replicas %d, want the target left at 0", *got.Spec.Replicas)
	}
	h := get[*api.HorizontalPodAutoscaler](t, c, ns, "web")
	for _, cond := range h.Status.Conditions {
		if cond.Type == api.ScalingActive && (cond.Status != api.ConditionFalse || cond.Reason != "ScalingDisabled" || cond.Message != "scaling is disabled since the replica count of the target is zero") {
			t.Errorf("ScalingActive %+v", cond)
		}
	}
	if hpaCondition(h, api.ScalingActive) != "False ScalingDisabled" {
		t.Errorf("ScalingActive %s, want False ScalingDisabled", hpaCondition(h, api.ScalingActive))
	}
	if e := ev.take(); len(e) != 0 {
		t.Errorf("events %q", e)
	}
}

// TestHPADecisionsPostedToTrace: each sync of a controller fed a table of
// metrics posts its decision to the autoscaler's trace (as the leader
// does to its API server's memory: api/trace_hpa.go), and describe hpa's
// section renders them with their inputs: the per pod values, the ratio
// and the tolerance test, the window that held a scale down, the rescale.
func TestHPADecisionsPostedToTrace(t *testing.T) {
	ctx := context.Background()
	c := fake.New(deployment(2, "gpu-load"), gpuHPA(), runningPod("web-a"), runningPod("web-b"))
	syncs := []struct {
		at      time.Duration
		pods    map[string]int64
		replica int32 // the Deployment's replicas after the sync
		want    []string
	}{
		{0, map[string]int64{"web-a": 90000, "web-b": 90000}, 3, []string{
			"2 -> 3 replicas", "current 2 (min 1, max 5)",
			"pods web-a=90 web-b=90; ratio 1.286 outside tolerance (|1 - 1.286| = 0.286 > 0.1) -> 3",
			"scaled 2 -> 3 (pods metric DCGM_FI_DEV_GPU_UTIL above target)"}},
		// web-c, new, is still Pending: not ready, counted at 0 for a
		// scale up, which then turns into a scale down: no change.
		{15 * time.Second, map[string]int64{"web-a": 72000, "web-b": 75000}, 3, []string{
			"3 -> 3 replicas", "pods web-a=72 web-b=75 web-c=0; ratio 1.050 (0.700 with missing/not-ready pods counted) outside tolerance (|1 - 0.700| = 0.300 > 0.1) but the direction turned: no change -> 3 (ready 2, not ready 1, missing 0, ignored 0)"}},
		{30 * time.Second, map[string]int64{"web-a": 66000, "web-b": 68000}, 3, []string{
			"3 -> 3 replicas", "pods web-a=66 web-b=68; ratio 0.957 within tolerance (|1 - 0.957| = 0.043 <= 0.1) -> 3 (ready 2, not ready 1, missing 0, ignored 0)"}},
		{45 * time.Second, map[string]int64{"web-a": 0, "web-b": 0}, 3, []string{
			"3 -> 3 replicas", "pods web-a=0 web-b=0; ratio 0.000 outside tolerance (|1 - 0.000| = 1.000 > 0.1) -> 0 (ready 2, not ready 1, missing 0, ignored 0)",
			"ScaleDownStabilized: recent recommendations were higher than current one, applying the highest recent recommendation"}},
	}
	r := NewHPAController(c, fakeLister{c, hpaKind()}, fakeLister{c, podKind()}, &tableMetrics{}, nil,
		HPAConfig{SyncPeriod: 15 * time.Second, DownscaleStabilization: time.Minute}, nil)
	var clock time.Time
	r.calc.now = func() time.Time { return clock }
	for i, s := range syncs {
		if i == 1 {
			if _, err := c.Create(ctx, runningPod("web-c")); err != nil {
				t.Fatal(err)
			}
		}
		clock = t0.Add(s.at)
		r.metrics = &tableMetrics{pods: s.pods}
		_ = r.Reconcile(ctx, ns+"/web")
		if got := get[*api.Deployment](t, c, ns, "web"); *got.Spec.Replicas != s.replica {
			t.Fatalf("sync %d: replicas %d, want %d", i, *got.Spec.Replicas, s.replica)
		}
	}
	tr, err := c.GetObjectTrace(ctx, hpaKind(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	ds := api.HPADecisions(tr.Spans)
	if len(ds) != len(syncs) {
		t.Fatalf("%d decisions in the trace, want one per sync (%d): %+v", len(ds), len(syncs), tr.Spans)
	}
	section := api.DescribeHPADecisions("web", tr.Spans, 10)
	blocks := strings.Split(section, "\n  20")[1:] // one per sync, after the header
	if !strings.HasPrefix(section, "Decisions (skiff: the last 4 syncs, oldest first; `skiff trace hpa/web`):\n") || len(blocks) != len(syncs) {
		t.Fatalf("section:\n%s", section)
	}
	for i, s := range syncs {
		if !ds[i].Time.Equal(t0.Add(s.at)) {
			t.Errorf("decision %d at %v, want %v", i, ds[i].Time, t0.Add(s.at))
		}
		for _, want := range s.want {
			if !strings.Contains(blocks[i], want) {
				t.Errorf("sync %d: the section lacks %q:\n%s", i, want, section)
			}
		}
	}
	// Each decision carries what its metric read, per pod (the dashboard's
	// plot): the measured values only, never the stand-in 0 of the
	// not-ready web-c.
	wantPods := []map[string]float64{{"web-a": 90, "web-b": 90}, {"web-a": 72, "web-b": 75}, {"web-a": 66, "web-b": 68}, {"web-a": 0, "web-b": 0}}
	wantProposal := []int32{3, 3, 3, 0}
	for i, d := range ds {
		if d.Rescaled != (i == 0) {
			t.Errorf("decision %d: rescaled %v, want only the first", i, d.Rescaled)
		}
		if len(d.Metrics) != 1 {
			t.Errorf("decision %d: metrics %+v, want one", i, d.Metrics)
			continue
		}
		m := d.Metrics[0]
		if m.Metric != "pods metric DCGM_FI_DEV_GPU_UTIL" || m.Unit != "" || m.Target != 70 || !maps.Equal(m.Pods, wantPods[i]) || m.Proposal != wantProposal[i] {
			t.Errorf("decision %d: metric %+v, want pods %v, target 70, proposal %d", i, m, wantPods[i], wantProposal[i])
		}
	}
	if m := ds[1].Metrics; len(m) == 1 && m[0].Current != 73.5 {
		t.Errorf("decision 1: current %v, want the ready pods' average 73.5", m[0].Current)
	}
	// Only the last n are shown.
	if got := api.DescribeHPADecisions("web", tr.Spans, 1); strings.Contains(got, "2 -> 3 replicas") || !strings.Contains(got, "the last 1 syncs") {
		t.Errorf("the last one only:\n%s", got)
	}
}
