package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A Kueue kind at v1beta1: the body converted in, the answer converted
// out, Kueue's deprecation warning on every answer; v1beta2 sees the
// stored names.
func TestKueueV1beta1Served(t *testing.T) {
	e := newEnv(t)
	cq := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"cohort":"research","namespaceSelector":{}}}`
	get := func(method, path, body string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
		return resp, m
	}
	tests := []struct {
		name, method, path, body string
		code                     int
		warn                     bool
		want                     func(m map[string]any) bool
	}{
		{"create at v1beta1", http.MethodPost, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", cq, http.StatusCreated, true,
			func(m map[string]any) bool {
				return m["apiVersion"] == "kueue.x-k8s.io/v1beta1" && m["spec"].(map[string]any)["cohort"] == "research"
			}},
		{"read at v1beta2", http.MethodGet, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq", "", http.StatusOK, false,
			func(m map[string]any) bool {
				return m["apiVersion"] == "kueue.x-k8s.io/v1beta2" && m["spec"].(map[string]any)["cohortName"] == "research"
			}},
		{"list at v1beta1", http.MethodGet, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "", http.StatusOK, true,
			func(m map[string]any) bool {
				it := m["items"].([]any)[0].(map[string]any)
				return m["apiVersion"] == "kueue.x-k8s.io/v1beta1" && it["apiVersion"] == "kueue.x-k8s.io/v1beta1" && it["spec"].(map[string]any)["cohort"] == "research"
			}},
		{"discovery lists v1beta1", http.MethodGet, "/apis/kueue.x-k8s.io/v1beta1", "", http.StatusOK, false,
			func(m map[string]any) bool { return strings.Contains(mustJSON(t, m), `"clusterqueues"`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, m := get(tt.method, tt.path, tt.body)
			if resp.StatusCode != tt.code {
				t.Fatalf("code %d, want %d: %v", resp.StatusCode, tt.code, m)
			}
			w := resp.Header.Get("Warning")
			if got := strings.Contains(w, "This version is deprecated. Use v1beta2 instead."); got != tt.warn {
				t.Errorf("Warning header %q, want the deprecation warning: %v", w, tt.warn)
			}
			if !tt.want(m) {
				t.Errorf("answer %v", m)
			}
		})
	}
}

// Kueue's job webhook: a Job with a queue name is created suspended.
func TestKueueJobCreatedSuspended(t *testing.T) {
	e := newEnv(t)
	job := func(name string, labels string) string {
		return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"` + name + `","labels":{` + labels + `}},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`
	}
	tests := []struct {
		name, body string
		suspended  bool
	}{
		{"queued", job("queued", `"kueue.x-k8s.io/queue-name":"user-queue"`), true},
		{"not queued", job("plain", `"app":"x"`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.must(http.StatusCreated, http.MethodPost, "/apis/batch/v1/namespaces/default/jobs", tt.body)
			var j struct {
				Spec struct {
					Suspend *bool `json:"suspend"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			if got := j.Spec.Suspend != nil && *j.Spec.Suspend; got != tt.suspended {
				t.Errorf("suspend %v, want %v", got, tt.suspended)
			}
		})
	}
}
