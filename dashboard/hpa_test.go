package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/dashboard"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/pki"
)

func testHPA(ns string) *api.HorizontalPodAutoscaler {
	minR := int32(1)
	target := resource.MustParse("70")
	return &api.HorizontalPodAutoscaler{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: ns},
		Spec: api.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: api.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR, MaxReplicas: 3,
			Metrics: []api.MetricSpec{{Type: api.PodsMetricSourceType, Pods: &api.PodsMetricSource{
				Metric: api.MetricIdentifier{Name: "DCGM_FI_DEV_GPU_UTIL"},
				Target: api.MetricTarget{Type: api.AverageValueMetricType, AverageValue: &target}}}},
		}}
}

// gpuSample is one sync's read of DCGM_FI_DEV_GPU_UTIL (target 70).
func gpuSample(pods map[string]float64, current float64, proposal int32) api.HPAMetricSample {
	return api.HPAMetricSample{Metric: "pods metric DCGM_FI_DEV_GPU_UTIL", Target: 70, Current: current, Pods: pods, Proposal: proposal}
}

// The autoscaler view's data (api/hpa/NS/NAME): the autoscaler and its
// decisions, oldest first, each with its replica counts, its steps and
// what its metric read per pod, as the controller posted them; a missing
// autoscaler is 404, a path without a name 400.
func TestHPAViewData(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	admin := apiserver.WithUser(ctx, apiserver.User{Name: apiserver.AdminUser, Groups: []string{pki.MastersGroup}})
	if _, err := s.local.Create(admin, testHPA("default")); err != nil {
		t.Fatal(err)
	}
	hk := api.MustKindOf(&api.HorizontalPodAutoscaler{})
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	spans := []api.TraceSpan{
		api.NewHPADecisionSpan(t0, t0, 1, 1, []string{"current 1 (min 1, max 3)", "proposal 1 -> 1"}, gpuSample(map[string]float64{"web-a": 10}, 10, 1)),
		api.NewHPADecisionSpan(t0.Add(2*time.Second), t0.Add(2*time.Second), 1, 2, []string{"scaled 1 -> 2 (pods metric DCGM_FI_DEV_GPU_UTIL above target)"},
			gpuSample(map[string]float64{"web-a": 90}, 90, 2)),
		api.NewHPADecisionSpan(t0.Add(4*time.Second), t0.Add(4*time.Second), 2, 2, []string{"proposal 2 -> 2"},
			gpuSample(map[string]float64{"web-a": 88, "web-b": 91}, 89.5, 3)),
		{Component: "someone-else", Step: "note", Start: api.MicroTime{Time: t0}}, // not a decision: left out
	}
	if err := s.local.AddObjectTrace(admin, hk, "default", "web", spans...); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	if r := s.do(t, b, http.MethodGet, s.loginURL(t, "hpa/default/web"), "", ""); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/dashboard/#/hpa/default/web" {
		t.Fatalf("login to the hpa view: %s %s", r.Status, r.Header.Get("Location"))
	}
	r := s.do(t, b, http.MethodGet, "/dashboard/api/hpa/default/web", "", "")
	var v dashboard.HPAView
	if err := json.NewDecoder(r.Body).Decode(&v); r.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET api/hpa/default/web: %s %v", r.Status, err)
	}
	if v.HPA == nil || v.HPA.Name != "web" || v.HPA.Spec.MaxReplicas != 3 {
		t.Errorf("hpa: %+v", v.HPA)
	}
	if len(v.Decisions) != 3 {
		t.Fatalf("%d decisions, want the 3 syncs: %+v", len(v.Decisions), v.Decisions)
	}
	wantPods := []map[string]float64{{"web-a": 10}, {"web-a": 90}, {"web-a": 88, "web-b": 91}}
	for i, d := range v.Decisions {
		if !d.Time.Equal(t0.Add(time.Duration(i) * 2 * time.Second)) {
			t.Errorf("decision %d at %v", i, d.Time)
		}
		if len(d.Metrics) != 1 || !maps.Equal(d.Metrics[0].Pods, wantPods[i]) || d.Metrics[0].Target != 70 || d.Metrics[0].Metric != "pods metric DCGM_FI_DEV_GPU_UTIL" {
			t.Errorf("decision %d: metrics %+v, want pods %v against 70", i, d.Metrics, wantPods[i])
		}
	}
	if d := v.Decisions[1]; d.CurrentReplicas != 1 || d.DesiredReplicas != 2 || len(d.Steps) != 1 || d.Steps[0] != "scaled 1 -> 2 (pods metric DCGM_FI_DEV_GPU_UTIL above target)" {
		t.Errorf("the rescale: %+v", d)
	}
	// The wire names the page reads.
	raw := s.do(t, b, http.MethodGet, "/dashboard/api/hpa/default/web", "", "")
	var wire struct {
		Decisions []map[string]any `json:"decisions"`
	}
	if err := json.NewDecoder(raw.Body).Decode(&wire); err != nil || len(wire.Decisions) != 3 {
		t.Fatalf("decode: %v %+v", err, wire)
	}
	for _, k := range []string{"time", "currentReplicas", "desiredReplicas", "steps", "metrics"} {
		if _, ok := wire.Decisions[1][k]; !ok {
			t.Errorf("a decision on the wire lacks %q: %v", k, wire.Decisions[1])
		}
	}

	for _, tc := range []struct {
		path string
		code int
	}{
		{"/dashboard/api/hpa/default/nope", http.StatusNotFound},
		{"/dashboard/api/hpa/default", http.StatusBadRequest},
		{"/dashboard/api/hpa/default/web/x", http.StatusBadRequest},
	} {
		if r := s.do(t, b, http.MethodGet, tc.path, "", ""); r.StatusCode != tc.code {
			body, _ := io.ReadAll(r.Body)
			t.Errorf("GET %s: %s %s, want %d", tc.path, r.Status, body, tc.code)
		}
	}
}

// A student reads the autoscaler view of their namespace (the view
// ClusterRole has horizontalpodautoscalers and their trace) and is refused
// another namespace's, as `kubectl get hpa` would be.
func TestHPAViewAsStudent(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	admin := apiserver.WithUser(ctx, apiserver.User{Name: apiserver.AdminUser, Groups: []string{pki.MastersGroup}})
	for _, ns := range []string{"alice", "bob"} {
		if _, err := s.local.Create(admin, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.local.Create(admin, testHPA(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.local.Create(admin, &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: "alice-view", Namespace: "alice"},
		RoleRef:  api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: "view"},
		Subjects: []api.Subject{{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	alice := apiserver.WithUser(ctx, apiserver.User{Name: "alice", Groups: []string{"students", "system:authenticated"}})
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		ok, err := s.local.Can(alice, "get", "autoscaling", "horizontalpodautoscalers", "trace", "alice", "web")
		return ok, fmt.Sprintf("alice cannot read her autoscaler's trace yet (%v)", err)
	})
	b := s.browser(t)
	if r := s.do(t, b, http.MethodGet, s.loginURLAs(t, "alice-token", "hpa/alice/web"), "", ""); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's login: %s", r.Status)
	}
	if r := s.do(t, b, http.MethodGet, "/dashboard/api/hpa/alice/web", "", ""); r.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(r.Body)
		t.Errorf("alice's own autoscaler: %s %s", r.Status, body)
	}
	r := s.do(t, b, http.MethodGet, "/dashboard/api/hpa/bob/web", "", "")
	body, _ := io.ReadAll(r.Body)
	var st api.Status
	const want = `horizontalpodautoscalers.autoscaling "web" is forbidden: User "alice" cannot get resource "horizontalpodautoscalers" in API group "autoscaling" in the namespace "bob"`
	if r.StatusCode != http.StatusForbidden || json.Unmarshal(body, &st) != nil || st.Message != want {
		t.Errorf("bob's autoscaler as alice: %s %s, want 403 %q", r.Status, body, want)
	}
}
