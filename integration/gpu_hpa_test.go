package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/dashboard"
	"skiff.dev/skiff/internal/testwait"
)

// The HorizontalPodAutoscaler on GPU utilisation (issue 23's "Done when"),
// on TestGPUOnSimulatedDGXA100's cluster: the node's DCGM exporter → the
// custom metrics API → the HPA controller → the Deployment's scale. The
// control plane runs with a short sync period and scale-down window (the
// controller's --horizontal-pod-autoscaler-* flags, gpuHPATune), and its
// controllers' reconcile lines are kept (the dashboard's tee) to count the
// autoscaler's syncs.

const (
	gpuHPASync   = 2 * time.Second // --horizontal-pod-autoscaler-sync-period
	gpuHPAWindow = 6 * time.Second // --horizontal-pod-autoscaler-downscale-stabilization
)

// gpuHPALoops are the control plane's reconcile lines (gpuHPATune).
var gpuHPALoops *dashboard.Reconciles

// gpuHPATune is TestGPUOnSimulatedDGXA100's control plane configuration:
// the dashboard as `skiff up` has it, and a tee of the controllers' log
// into gpuHPALoops.
func gpuHPATune(cfg *controlplane.Config) {
	cfg.HPA.SyncPeriod = gpuHPASync
	cfg.HPA.DownscaleStabilization = gpuHPAWindow
	dashboard.Attach(cfg)
	gpuHPALoops = dashboard.NewReconciles(0)
	withDashboard := cfg.ControllerLog
	cfg.ControllerLog = func(h slog.Handler) slog.Handler {
		return dashboard.TeeReconciles(withDashboard(h), gpuHPALoops)
	}
}

// gpuHPAApp is an inference Deployment whose pods each hold one GPU and
// run the simulated CUDA workload at 90 % in the background (its pid in
// /tmp/load, so the test can stop the load and leave the pod running),
// and its autoscaler on dcgm-exporter's DCGM_FI_DEV_GPU_UTIL: AverageValue
// 70, the homework's "scale up above 70 %".
const gpuHPAApp = `apiVersion: apps/v1
kind: Deployment
metadata: {name: infer}
spec:
  replicas: 1
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: server
        image: ` + gpuImage + `
        command: [sh, -c, "trap 'exit 0' TERM; gpu-load --util 90 & echo $! >/tmp/load; while true; do sleep 1; done"]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: infer}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: infer}
  minReplicas: 1
  maxReplicas: 2
  metrics:
  - type: Pods
    pods:
      metric: {name: DCGM_FI_DEV_GPU_UTIL}
      target: {type: AverageValue, averageValue: "70"}
`

// gpuHPAGemma stands in for kubernetes/examples' vLLM Deployment (the
// target of examples/autoscaling/gpu-horizontal-pod-autoscaler.yaml, its
// file unchanged): one GPU at 10 %.
const gpuHPAGemma = `apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-gemma-deployment}
spec:
  replicas: 1
  selector: {matchLabels: {app: gemma-server}}
  template:
    metadata: {labels: {app: gemma-server}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: inference-server
        image: ` + gpuImage + `
        command: [sh, -c, "exec gpu-load --util 10"]
        resources: {limits: {nvidia.com/gpu: 1}}
`

// hpaSyncs are the HPA controller's reconcile lines about namespace/name.
func hpaSyncs(key string) []dashboard.Reconcile {
	recs, _ := gpuHPALoops.Since(0)
	var out []dashboard.Reconcile
	for _, r := range recs {
		if r.Controller == "horizontal-pod-autoscaler" && r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// syncsSay: a sync of namespace/name logged text.
func syncsSay(key, text string) bool {
	for _, r := range hpaSyncs(key) {
		if strings.Contains(r.Action, text) {
			return true
		}
	}
	return false
}

// podValueRE is one pod's value in a sync's trace ("infer-6c9f-x2v4q=90").
var podValueRE = regexp.MustCompile(`\b(infer-[a-z0-9-]+)=([0-9]+)(m?)\b`)

// syncValues are the per-pod values (in units) a sync read.
func syncValues(r dashboard.Reconcile) map[string]float64 {
	out := map[string]float64{}
	for _, m := range podValueRE.FindAllStringSubmatch(r.Action, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[3] == "m" {
			v /= 1000
		}
		out[m[1]] = v
	}
	return out
}

func hpaCond(h *api.HorizontalPodAutoscaler, typ string) string {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c.Status + " " + c.Reason + " " + c.Message
		}
	}
	return "none"
}

func (g *gpuCluster) applyText(t *testing.T, name, text string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g.cli(t, "apply", "-f", f)
}

func (g *gpuCluster) hpa(t *testing.T, name string) *api.HorizontalPodAutoscaler {
	t.Helper()
	h, err := client.Get[*api.HorizontalPodAutoscaler](context.Background(), g.c, gpuNS, name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (g *gpuCluster) replicas(t *testing.T, name string) int32 {
	t.Helper()
	d, err := client.Get[*api.Deployment](context.Background(), g.c, gpuNS, name)
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// gpuHPAScalesOnUtilization: pods at 90 % scale the Deployment 1 → 2
// within two syncs of the load showing in the metric; once the load stops
// the scale-down waits out the stabilization window (syncs that say
// ScaleDownStabilized) and then goes 2 → 1, with Kubernetes' conditions
// and SuccessfulRescale events. Beside it kubernetes/examples' GPU HPA,
// applied unchanged, reads its gpu_utilization_percent through the
// adapter's rule.
func (g *gpuCluster) gpuHPAScalesOnUtilization(t *testing.T) {
	start := time.Now()
	g.applyText(t, "infer.yaml", gpuHPAApp)
	g.applyText(t, "gemma.yaml", gpuHPAGemma)
	g.cli(t, "apply", "-f", "../examples/autoscaling/gpu-horizontal-pod-autoscaler.yaml")

	// The sync that scaled is logged after it wrote the scale: wait for both.
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		return g.replicas(t, "infer") == 2 && syncsSay(gpuNS+"/infer", "scaled 1 -> 2"),
			fmt.Sprintf("replicas %d; autoscaler %+v", g.replicas(t, "infer"), g.hpa(t, "infer").Status)
	})
	scaledUp := time.Since(start)
	syncs := hpaSyncs(gpuNS + "/infer")
	firstLoaded, upAt := -1, -1
	for i, r := range syncs {
		for _, v := range syncValues(r) {
			if v > 70 && firstLoaded < 0 {
				firstLoaded = i
			}
		}
		if strings.Contains(r.Action, "scaled 1 -> 2") {
			upAt = i
			break
		}
	}
	if firstLoaded < 0 || upAt < 0 || upAt-firstLoaded > 1 {
		t.Errorf("the scale-up came at sync %d, the load above target was first read at sync %d (want within two syncs):\n%s", upAt, firstLoaded, syncLines(syncs))
	}
	waitEventSaying(t, g.c, gpuNS, "infer", "SuccessfulRescale", "New size: 2; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target")
	// Both pods at 90 % want 3; the maximum holds it at 2.
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		h := g.hpa(t, "infer")
		lim, act := hpaCond(h, api.ScalingLimited), hpaCond(h, api.ScalingActive)
		return lim == "True TooManyReplicas the desired replica count is more than the maximum replica count" &&
				act == "True ValidMetricFound the HPA was able to successfully calculate a replica count from pods metric DCGM_FI_DEV_GPU_UTIL",
			fmt.Sprintf("ScalingLimited %s; ScalingActive %s; metrics %+v", lim, act, h.Status.CurrentMetrics)
	})
	desc := g.cli(t, "describe", "hpa", "infer")
	for _, want := range []string{`"DCGM_FI_DEV_GPU_UTIL" on pods:`, "/ 70", "Min replicas:", "Deployment pods:", "2 current / 2 desired",
		"SuccessfulRescale", "New size: 2; reason: pods metric DCGM_FI_DEV_GPU_UTIL above target"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe hpa infer: no %q:\n%s", want, desc)
		}
	}
	// skiff's section after kubectl's Events: the leader's decisions, read
	// from the API server's memory (api/trace_hpa.go), and trace hpa/NAME.
	if ev, sec := strings.Index(desc, "\nEvents:"), strings.Index(desc, "\nDecisions (skiff: the last "); ev < 0 || sec < ev ||
		!regexp.MustCompile(`\d -> \d replicas\n(?:    .*\n)*?    pods metric DCGM_FI_DEV_GPU_UTIL: pods (?:infer-[a-z0-9-]+=\d+ ?)+; ratio \d\.\d{3} (?:outside|within) tolerance`).MatchString(desc) {
		t.Errorf("describe hpa infer: no decisions after the Events:\n%s", desc)
	}
	if out := g.cli(t, "trace", "hpa/infer"); !strings.Contains(out, "scaled 1 -> 2 (pods metric DCGM_FI_DEV_GPU_UTIL above target)") {
		t.Errorf("trace hpa/infer:\n%s", out)
	}

	// kubernetes/examples' HPA found its metric: one pod at 10 % of a 20 target.
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		h := g.hpa(t, "gemma-server-gpu-hpa")
		ok := len(h.Status.CurrentMetrics) == 1 && h.Status.CurrentMetrics[0].Pods != nil &&
			h.Status.CurrentMetrics[0].Pods.Metric.Name == "gpu_utilization_percent" &&
			h.Status.CurrentMetrics[0].Pods.Current.AverageValue != nil && h.Status.CurrentMetrics[0].Pods.Current.AverageValue.String() == "10"
		return ok && hpaCond(h, api.ScalingActive) == "True ValidMetricFound the HPA was able to successfully calculate a replica count from pods metric gpu_utilization_percent",
			fmt.Sprintf("%+v", h.Status)
	})
	if out := g.cli(t, "get", "hpa", "gemma-server-gpu-hpa"); !regexp.MustCompile(`gemma-server-gpu-hpa\s+Deployment/vllm-gemma-deployment\s+10/20\s+1\s+5\s+1\s`).MatchString(out) {
		t.Errorf("get hpa gemma-server-gpu-hpa:\n%s", out)
	}
	if n := g.replicas(t, "vllm-gemma-deployment"); n != 1 {
		t.Errorf("vllm-gemma-deployment at %d replicas, want 1 (10 %% of a 20 %% target)", n)
	}

	// The load stops; the pods stay.
	stopped := len(hpaSyncs(gpuNS + "/infer"))
	for _, p := range listPods(t, g.c, gpuNS, "app=infer") {
		g.cli(t, "exec", p.Name, "--", "sh", "-c", "kill $(cat /tmp/load)")
	}
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		return g.replicas(t, "infer") == 1 && syncsSay(gpuNS+"/infer", "scaled 2 -> 1"), fmt.Sprintf("replicas %d; conditions %+v", g.replicas(t, "infer"), g.hpa(t, "infer").Status.Conditions)
	})
	syncs = hpaSyncs(gpuNS + "/infer")[stopped:]
	idle, stabilized, downAt := -1, 0, -1
	for i, r := range syncs {
		vals := syncValues(r)
		low := len(vals) == 2
		for _, v := range vals {
			low = low && v < 70*0.9
		}
		if low && idle < 0 {
			idle = i
		}
		if idle >= 0 && strings.Contains(r.Action, "ScaleDownStabilized: recent recommendations were higher than current one, applying the highest recent recommendation") {
			stabilized++
		}
		if strings.Contains(r.Action, "scaled 2 -> 1") {
			downAt = i
			break
		}
	}
	if idle < 0 || downAt < 0 || stabilized == 0 || downAt <= idle {
		t.Errorf("after the load stopped: first idle sync %d, %d syncs held by the stabilization window, scale-down at sync %d:\n%s", idle, stabilized, downAt, syncLines(syncs))
	}
	waitEventSaying(t, g.c, gpuNS, "infer", "SuccessfulRescale", "New size: 1; reason: All metrics below target")
	t.Logf("MEASURE HPA on GPU utilisation: apply → 2 replicas in %v, load stopped → 1 replica after %d syncs (%d held by the %v window), sync period %v, %v in all",
		scaledUp.Round(time.Millisecond), downAt+1, stabilized, gpuHPAWindow, gpuHPASync, time.Since(start).Round(time.Millisecond))
}

func syncLines(rs []dashboard.Reconcile) string {
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "  %d %s desired %s: %s\n", i, r.Time.Format("15:04:05.000"), r.Desired, r.Action)
	}
	return b.String()
}

func eventLines(evs []*api.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s %s: %s", e.InvolvedObject.Kind, e.Type, e.Reason, e.Message)
	}
	return b.String()
}
