package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandlerExposesMetrics(t *testing.T) {
	m := New()
	m.ObserveReconcile("deployment", 3*time.Millisecond, nil)
	m.ObserveReconcile("deployment", time.Millisecond, errors.New("boom"))
	m.SetQueueDepth("deployment", 4)
	m.ObserveRequest("create", "pods", 201, 2*time.Millisecond)
	m.ObserveRequest("watch", "pods", 200, time.Minute)
	m.AddWatchers("pods", 1)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`skiff_reconcile_total{controller="deployment",result="success"} 1`,
		`skiff_reconcile_total{controller="deployment",result="error"} 1`,
		`skiff_reconcile_duration_seconds_count{controller="deployment"} 2`,
		`skiff_workqueue_depth{controller="deployment"} 4`,
		`apiserver_request_total{code="201",resource="pods",verb="create"} 1`,
		`apiserver_request_duration_seconds_count{resource="pods",verb="create"} 1`,
		`apiserver_watchers{resource="pods"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics output lacks %q", want)
		}
	}
	if strings.Contains(string(body), `apiserver_request_duration_seconds_count{resource="pods",verb="watch"}`) {
		t.Error("watch durations must not be in the latency histogram")
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.ObserveReconcile("x", time.Second, nil)
	m.SetQueueDepth("x", 1)
	m.ObserveRequest("get", "pods", 200, time.Second)
	m.AddWatchers("pods", 1)
	if err := m.Register(); err != nil {
		t.Fatal(err)
	}
}
