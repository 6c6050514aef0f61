package controllers

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

// The replica calculation against the cases of Kubernetes'
// replica_calculator_test.go (their inputs and expected outputs; the code
// is skiff's). Pods have two containers; a resource level is per
// container, so a pod's usage is twice it, as upstream's fixtures.

type calcPod struct {
	phase   string // "" = Running
	ready   string // "" = True
	hot     bool   // started now (inside the cpu initialization period)
	request string // per container; "" = 1, "-" = none
	level   int64  // per container, milli; -1 = no metric
}

func calcPods(t *testing.T, now time.Time, specs []calcPod) ([]*api.Pod, podMetrics) {
	t.Helper()
	var pods []*api.Pod
	m := podMetrics{}
	for i, s := range specs {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("test-pod-%d", i), Namespace: "ns", Labels: map[string]string{"name": "test-pod"}}}
		start := now.Add(-3 * time.Minute) // "cool": inside 5m, ready long enough
		if s.hot {
			start = now
		}
		p.Status.StartTime = &api.Time{Time: start}
		p.Status.Phase = api.PodRunning
		if s.phase != "" {
			p.Status.Phase = s.phase
		}
		ready := api.ConditionTrue
		if s.ready != "" {
			ready = s.ready
		}
		p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: ready, LastTransitionTime: api.Time{Time: start}}}
		for _, name := range []string{"container1", "container2"} {
			c := api.Container{Name: name, Image: "x"}
			if s.request != "-" {
				q := resource.MustParse(orDefault(s.request, "1"))
				c.Resources.Requests = api.ResourceList{"cpu": q}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		pods = append(pods, p)
		if s.level >= 0 {
			v := 2 * s.level
			m[p.Name] = podMetric{Value: v, Timestamp: now, Window: 30 * time.Second}
		}
	}
	return pods, m
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func levels(ls ...int64) []calcPod {
	out := make([]calcPod, len(ls))
	for i, l := range ls {
		out[i] = calcPod{level: l}
	}
	return out
}

func TestHPAResourceReplicasUpstreamTable(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	F := api.ConditionFalse
	cases := []struct {
		name           string
		current        int32
		target         int32
		pods           []calcPod
		want, wantUtil int32
		wantRaw        int64
		wantErr        string
	}{
		{name: "ScaleUp", current: 3, target: 30, pods: levels(300, 500, 700), want: 5, wantUtil: 50, wantRaw: 1000},
		{name: "ScaleUpUnreadyLessScale", current: 3, target: 30, pods: []calcPod{{ready: F, level: 300}, {level: 500}, {level: 700}}, want: 4, wantUtil: 60, wantRaw: 1200},
		{name: "ScaleUpUnreadyNoScale", current: 3, target: 30, pods: []calcPod{{level: 400}, {ready: F, level: 500}, {ready: F, level: 700}}, want: 3, wantUtil: 40, wantRaw: 800},
		{name: "ScaleHotCpuNoScale", current: 3, target: 30, pods: []calcPod{{level: 400}, {ready: F, hot: true, level: 500}, {ready: F, hot: true, level: 700}}, want: 3, wantUtil: 40, wantRaw: 800},
		{name: "ScaleUpIgnoresFailedPods", current: 2, target: 30, pods: []calcPod{{level: 500}, {level: 700}, {ready: F, phase: api.PodFailed, level: -1}, {ready: F, phase: api.PodFailed, level: -1}}, want: 4, wantUtil: 60, wantRaw: 1200},
		{name: "ScaleDown", current: 5, target: 50, pods: levels(100, 300, 500, 250, 250), want: 3, wantUtil: 28, wantRaw: 560},
		{name: "ScaleDownExcludeUnreadyPods", current: 5, target: 50, pods: []calcPod{{level: 100}, {level: 300}, {level: 500}, {ready: F, level: 250}, {ready: F, level: 250}}, want: 2, wantUtil: 30, wantRaw: 600},
		{name: "ScaleDownExcludeUnscheduledPods", current: 5, target: 50, pods: []calcPod{{level: 100}, {ready: F, phase: api.PodPending, level: -1}, {ready: F, phase: api.PodPending, level: -1}, {ready: F, phase: api.PodPending, level: -1}, {ready: F, phase: api.PodPending, level: -1}}, want: 1, wantUtil: 10, wantRaw: 200},
		{name: "ScaleDownIgnoreHotCpuPods", current: 5, target: 50, pods: []calcPod{{level: 100}, {level: 300}, {level: 500}, {hot: true, level: 250}, {hot: true, level: 250}}, want: 2, wantUtil: 30, wantRaw: 600},
		{name: "Tolerance", current: 3, target: 100, pods: []calcPod{{request: "0.9", level: 1010}, {request: "1.0", level: 1030}, {request: "1.1", level: 1020}}, want: 3, wantUtil: 102, wantRaw: 2040},
		{name: "MissingMetrics", current: 4, target: 100, pods: []calcPod{{level: 400}, {level: 95}, {level: -1}, {level: -1}}, want: 3, wantUtil: 24, wantRaw: 495},
		{name: "EmptyCPURequest", current: 1, target: 100, pods: []calcPod{{request: "-", level: 200}}, wantErr: "missing request for cpu in container container1 of Pod test-pod-0"},
		{name: "MissingMetricsNoChangeEq", current: 2, target: 100, pods: []calcPod{{level: 1000}, {level: -1}}, want: 2, wantUtil: 100, wantRaw: 2000},
		{name: "MissingMetricsNoChangeGt", current: 2, target: 100, pods: []calcPod{{level: 1900}, {level: -1}}, want: 2, wantUtil: 190, wantRaw: 3800},
		{name: "MissingMetricsNoChangeLt", current: 2, target: 100, pods: []calcPod{{level: 600}, {level: -1}}, want: 2, wantUtil: 60, wantRaw: 1200},
		{name: "MissingMetricsUnreadyChange", current: 3, target: 50, pods: []calcPod{{ready: F, level: 100}, {level: 450}, {level: -1}}, want: 3, wantUtil: 45, wantRaw: 900},
		{name: "MissingMetricsUnreadyScaleUp", current: 3, target: 50, pods: []calcPod{{ready: F, level: 100}, {level: 2000}, {level: -1}}, want: 4, wantUtil: 200, wantRaw: 4000},
		{name: "MissingMetricsHotCpuScaleUp", current: 3, target: 50, pods: []calcPod{{ready: F, hot: true, level: 100}, {level: 2000}, {level: -1}}, want: 4, wantUtil: 200, wantRaw: 4000},
		{name: "MissingMetricsUnreadyScaleDown", current: 4, target: 50, pods: []calcPod{{ready: F, level: 100}, {level: 100}, {level: 100}, {level: -1}}, want: 3, wantUtil: 10, wantRaw: 200},
		{name: "DuringRollingUpdateWithMaxSurge", current: 2, target: 50, pods: []calcPod{{level: 100}, {level: 100}, {level: -1}}, want: 2, wantUtil: 10, wantRaw: 200},
		{name: "NoPods", current: 2, target: 50, wantErr: "no pods returned by selector while calculating replica count"},
		{name: "AllUnready", current: 2, target: 50, pods: []calcPod{{ready: F, level: 100}, {ready: F, level: 100}}, wantErr: "did not receive metrics for targeted pods (pods might be unready)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultReplicaCalc()
			c.now = func() time.Time { return now }
			pods, m := calcPods(t, now, tc.pods)
			n, util, raw, tr, err := c.resourceReplicas(tc.current, tc.target, "cpu", "", pods, m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want || util != tc.wantUtil || raw != tc.wantRaw {
				t.Errorf("replicas %d utilization %d raw %d, want %d %d %d (trace: %s)", n, util, raw, tc.want, tc.wantUtil, tc.wantRaw, tr)
			}
			if tr.Proposal != n {
				t.Errorf("trace proposal %d, returned %d", tr.Proposal, n)
			}
			// The plot's values: each ready pod's own utilization, in
			// percent of its request (two containers of the spec's request).
			if len(tr.Shown) != tr.Ready {
				t.Errorf("shown %v for %d ready pods", tr.Shown, tr.Ready)
			}
			for i, p := range tc.pods {
				name := fmt.Sprintf("test-pod-%d", i)
				v, ok := tr.Shown[name]
				if !ok {
					continue
				}
				req := resource.MustParse(orDefault(p.request, "1"))
				if want := float64(2*p.level) * 100 / float64(2*req.MilliValue()); v != want {
					t.Errorf("%s shown at %v%%, want %v%%", name, v, want)
				}
			}
		})
	}
}

// TestHPAContainerResourceReplicas: only the named container counts
// (upstream's ContainerScaleUp).
func TestHPAContainerResourceReplicas(t *testing.T) {
	now := time.Now()
	c := defaultReplicaCalc()
	pods, _ := calcPods(t, now, levels(0, 0, 0))
	m := podMetrics{}
	for i, l := range []int64{300, 500, 700} {
		m[pods[i].Name] = podMetric{Value: l, Timestamp: now.Add(time.Minute), Window: 30 * time.Second}
	}
	n, util, raw, _, err := c.resourceReplicas(3, 30, "cpu", "container2", pods, m)
	if err != nil || n != 5 || util != 50 || raw != 500 {
		t.Errorf("got %d %d %d %v, want 5 replicas at 50%% (500m)", n, util, raw, err)
	}
}

func TestHPAPlainMetricReplicasUpstreamTable(t *testing.T) {
	now := time.Now()
	F := api.ConditionFalse
	cases := []struct {
		name    string
		current int32
		target  int64
		pods    []calcPod // level is the pod's value / 2 (calcPods doubles it)
		want    int32
		wantAvg int64
	}{
		{name: "ScaleUpCM", current: 3, target: 15000, pods: levels(10000, 5000, 15000), want: 4, wantAvg: 20000},
		{name: "ScaleUpCMUnreadyHotCpuNoLessScale", current: 3, target: 15000, pods: []calcPod{{level: 25000}, {level: 5000}, {ready: F, hot: true, level: 15000}}, want: 6, wantAvg: 30000},
		{name: "ScaleDownCM", current: 5, target: 20000, pods: levels(6000, 6000, 6000, 6000, 6000), want: 3, wantAvg: 12000},
		{name: "ToleranceCM", current: 3, target: 20000, pods: levels(10000, 10500, 10500), want: 3, wantAvg: 20666},
		{name: "GPU 90 against 70", current: 2, target: 70000, pods: levels(45000, 45000), want: 3, wantAvg: 90000},
		{name: "GPU idle", current: 3, target: 70000, pods: levels(0, 0, 0), want: 0, wantAvg: 0},
		{name: "GPU missing pod on scale up counts 0", current: 3, target: 70000, pods: []calcPod{{level: 50000}, {level: 50000}, {level: -1}}, want: 3, wantAvg: 100000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultReplicaCalc()
			c.now = func() time.Time { return now }
			pods, m := calcPods(t, now, tc.pods)
			n, avg, tr, err := c.plainReplicas(tc.current, tc.target, false, pods, m)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want || avg != tc.wantAvg {
				t.Errorf("replicas %d average %d, want %d %d (%s)", n, avg, tc.want, tc.wantAvg, tr)
			}
		})
	}
}

func TestHPAObjectAndExternalReplicasUpstreamTable(t *testing.T) {
	now := time.Now()
	c := defaultReplicaCalc()
	c.now = func() time.Time { return now }
	three, _ := calcPods(t, now, levels(0, 0, 0))
	one, _ := calcPods(t, now, levels(0))
	// ScaleUpCMObject: 20000 against 15000 over 3 ready pods.
	if n, _, err := c.usageRatioReplicas(3, 20000.0/15000, three); err != nil || n != 4 {
		t.Errorf("object: %d %v, want 4", n, err)
	}
	// ToleranceCMObject: 20666 against 20000.
	if n, tr, _ := c.usageRatioReplicas(3, 20666.0/20000, three); n != 3 || !tr.WithinTolerance {
		t.Errorf("object tolerance: %d %+v, want 3 within tolerance", n, tr)
	}
	// ScaleUpCMExternal: 8600 against 4400 over 1 pod.
	if n, _, err := c.usageRatioReplicas(1, 8600.0/4400, one); err != nil || n != 2 {
		t.Errorf("external: %d %v, want 2", n, err)
	}
	// ScaleUpCMPerPodObject: 20000 at 5000 per pod from 3.
	if n, avg, _ := c.perPodReplicas(3, 20000, 5000); n != 4 || avg != 6667 {
		t.Errorf("object per pod: %d %d, want 4 6667", n, avg)
	}
	// ScaleUpPerPodCMExternal: 8600 at 2150 per pod from 3.
	if n, avg, _ := c.perPodReplicas(3, 8600, 2150); n != 4 || avg != 2867 {
		t.Errorf("external per pod: %d %d, want 4 2867", n, avg)
	}
	// ScaleUpOverflow: MaxInt64 against 1 is MaxInt32 replicas, not a wrap.
	if n, _, err := c.usageRatioReplicas(3, float64(math.MaxInt64)/1, three); err != nil || n != math.MaxInt32 {
		t.Errorf("overflow: %d %v, want MaxInt32", n, err)
	}
	if n, _, _ := c.perPodReplicas(1, math.MaxInt64, 1); n != math.MaxInt32 {
		t.Errorf("per-pod overflow: %d, want MaxInt32", n)
	}
	// No ready pods: Kubernetes' error.
	if _, _, err := c.usageRatioReplicas(3, 2, nil); err == nil || !strings.Contains(err.Error(), "unable to calculate ready pods: no pods returned by selector") {
		t.Errorf("no pods: %v", err)
	}
	// Sums saturate: two huge pod values do not wrap negative.
	pods, _ := calcPods(t, now, levels(0, 0))
	m := podMetrics{pods[0].Name: {Value: math.MaxInt64}, pods[1].Name: {Value: math.MaxInt64}}
	if n, _, _, err := c.plainReplicas(2, 1000, false, pods, m); err != nil || n != math.MaxInt32 {
		t.Errorf("saturating sum: %d %v, want MaxInt32", n, err)
	}
}
