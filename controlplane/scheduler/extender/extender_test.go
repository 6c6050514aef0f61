package extender

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	extv1 "k8s.io/kube-scheduler/extender/v1"

	"skiff.dev/skiff/api"
)

func pod(limits map[string]string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	c := api.Container{Name: "c", Image: "i", Resources: api.ResourceRequirements{Limits: api.ResourceList{}}}
	for k, v := range limits {
		c.Resources.Limits[k] = resource.MustParse(v)
	}
	p.Spec.Containers = []api.Container{c}
	return p
}

// Over HTTPS with the extender's CA, node cache capable: the extender
// gets node names and answers names.
func TestFilterHTTPSNodeNames(t *testing.T) {
	var got extv1.ExtenderArgs
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		names := []string{"b", "zz"} // zz was not asked about: dropped
		_ = json.NewEncoder(w).Encode(extv1.ExtenderFilterResult{NodeNames: &names, FailedNodes: extv1.FailedNodesMap{"a": "no"}})
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	e, err := New(schedv1.Extender{URLPrefix: srv.URL, FilterVerb: "filter", EnableHTTPS: true, NodeCacheCapable: true,
		TLSConfig: &schedv1.ExtenderTLSConfig{CAData: ca}, HTTPTimeout: metav1.Duration{Duration: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*api.Node{{ObjectMeta: api.ObjectMeta{Name: "a"}}, {ObjectMeta: api.ObjectMeta{Name: "b"}}}
	fr, err := e.Filter(context.Background(), pod(nil), nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got.NodeNames == nil || strings.Join(*got.NodeNames, ",") != "a,b" || got.Nodes != nil || got.Pod == nil || got.Pod.Name != "p" {
		t.Errorf("sent %+v", got)
	}
	if strings.Join(fr.Feasible, ",") != "b" || fr.Failed["a"] != "no" {
		t.Errorf("result %+v", fr)
	}
}

func TestErrorsAndInterest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	e, _ := New(schedv1.Extender{URLPrefix: srv.URL + "/x", PrioritizeVerb: "prio", Weight: 1,
		ManagedResources: []schedv1.ExtenderManagedResource{{Name: "example.com/vgpu", IgnoredByScheduler: true}}, HTTPTimeout: metav1.Duration{Duration: time.Second}})
	_, err := e.Prioritize(context.Background(), pod(nil), nil)
	if want := "failed prio with extender at URL " + srv.URL + "/x/prio, code 500"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if e.IsInterested(pod(map[string]string{"nvidia.com/gpu": "1"})) || !e.IsInterested(pod(map[string]string{"example.com/vgpu": "1"})) {
		t.Error("interest follows managedResources")
	}
	if r := e.IgnoredResources(); len(r) != 1 || r[0] != "example.com/vgpu" {
		t.Errorf("ignored %v", r)
	}
}
