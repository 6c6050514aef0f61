package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/version"

	"skiff.dev/skiff/api"
)

// protobufBody encodes obj as client-go does for Content-Type
// application/vnd.kubernetes.protobuf.
func protobufBody(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	s := k8sScheme()
	if err := protobuf.NewSerializer(s, s).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestProtobufBodies(t *testing.T) {
	e := newEnv(t)
	pb := []string{"Content-Type", contentTypeProtobuf}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"a": "b"}}
	hostPID := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	one := int32(1)
	deploy := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}}}
	unknown := protobufBody(t, cm)
	unknown = bytes.Replace(unknown, []byte("ConfigMap"), []byte("WidgetMap"), 1)
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		header             []string
		code               int
		msg                string
	}{
		{"configmap", "POST", cmPath, protobufBody(t, cm), pb, 201, ""},
		{"deployment with empty defaults", "POST", "/apis/apps/v1/namespaces/default/deployments", protobufBody(t, deploy), pb, 201, ""},
		{"a field skiff lacks, set", "POST", "/api/v1/namespaces/default/pods", protobufBody(t, hostPID), pb, 400, "spec.hostPID"},
		{"a kind Kubernetes does not have", "POST", cmPath, unknown, pb, 415, "skiff reads protobuf for Kubernetes kinds only"},
		{"another kind than the path's", "POST", "/api/v1/namespaces/default/secrets", protobufBody(t, cm), pb, 400, "kind in the data (ConfigMap)"},
		{"not protobuf", "POST", cmPath, []byte(`{"metadata":{"name":"x"}}`), pb, 400, "decode protobuf body"},
		{"accept protobuf only", "GET", cmPath, nil, []string{"Accept", contentTypeProtobuf}, 406, "only the following media types are accepted"},
		{"accept protobuf, then JSON", "GET", cmPath, nil, []string{"Accept", contentTypeProtobuf + ", application/json"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != nil {
				body = tc.body
			}
			code, b := e.do(tc.method, tc.path, body, tc.header...)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			if tc.msg != "" && !strings.Contains(string(b), tc.msg) {
				t.Errorf("answer lacks %q: %s", tc.msg, b)
			}
		})
	}
	if _, err := e.reg.Get(context.Background(), podKind, "default", "p"); !api.IsNotFound(err) {
		t.Errorf("a refused protobuf pod was stored: %v", err)
	}
}

func TestDryRun(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", cmPath, configMap("", "kept"))
	before := e.must(200, "GET", cmPath+"/kept", nil)
	svc := `{"metadata":{"name":"s"},"spec":{"type":"NodePort","ports":[{"port":80}]}}`
	for _, tc := range []struct {
		name, method, path string
		body               any
		header             []string
		code               int
		check              func(b []byte) string
	}{
		{"create", "POST", cmPath + "?dryRun=All", configMap("", "new"), nil, 201, func(b []byte) string {
			if cm := decode[api.ConfigMap](t, b); cm.Name != "new" || cm.UID == "" || cm.ResourceVersion != "" {
				return "want the object with a uid and no resourceVersion: " + string(b)
			}
			return ""
		}},
		{"create of an invalid object", "POST", cmPath + "?dryRun=All", configMap("", "Bad_Name"), nil, 422, nil},
		{"create of an existing one", "POST", cmPath + "?dryRun=All", configMap("", "kept"), nil, 409, nil},
		{"service create shows its addresses", "POST", "/api/v1/namespaces/default/services?dryRun=All", svc, nil, 201, func(b []byte) string {
			s := decode[api.Service](t, b)
			if s.Spec.ClusterIP == "" || s.Spec.Ports[0].NodePort == 0 {
				return "no cluster IP or node port: " + string(b)
			}
			return ""
		}},
		{"update", "PUT", cmPath + "/kept?dryRun=All", `{"metadata":{"name":"kept"},"data":{"k":"changed"}}`, nil, 200, func(b []byte) string {
			if decode[api.ConfigMap](t, b).Data["k"] != "changed" {
				return "want the updated object: " + string(b)
			}
			return ""
		}},
		{"patch", "PATCH", cmPath + "/kept?dryRun=All", `{"data":{"k":"patched"}}`, []string{"Content-Type", "application/merge-patch+json"}, 200, func(b []byte) string {
			if decode[api.ConfigMap](t, b).Data["k"] != "patched" {
				return "want the patched object: " + string(b)
			}
			return ""
		}},
		{"delete", "DELETE", cmPath + "/kept?dryRun=All", nil, nil, 200, nil},
		{"delete, dryRun in the body", "DELETE", cmPath + "/kept", `{"dryRun":["All"]}`, nil, 200, nil},
		{"another value", "PUT", cmPath + "/kept?dryRun=Yes", configMap("", "kept"), nil, 422, func(b []byte) string {
			if !strings.Contains(string(b), `UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value`) {
				return "message: " + string(b)
			}
			return ""
		}},
		{"a subresource that cannot", "POST", "/api/v1/namespaces/default/pods/x/binding?dryRun=All", `{}`, nil, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do(tc.method, tc.path, tc.body, tc.header...)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			if tc.check != nil {
				if msg := tc.check(b); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	// Nothing was stored, changed or allocated.
	if after := e.must(200, "GET", cmPath+"/kept", nil); !bytes.Equal(before, after) {
		t.Errorf("dry runs changed the object:\n%s\n%s", before, after)
	}
	e.must(404, "GET", cmPath+"/new", nil)
	e.must(404, "GET", "/api/v1/namespaces/default/services/s", nil)
	alloc, err := e.st.Get(context.Background(), serviceAllocationKind, "", api.ServiceAllocationName)
	if err == nil && len(alloc.(*api.ServiceAllocation).Reservations) > 0 {
		t.Errorf("a dry run reserved addresses: %+v", alloc.(*api.ServiceAllocation).Reservations)
	}
}

func TestEviction(t *testing.T) {
	e := newEnv(t)
	const path = "/api/v1/namespaces/default/pods/"
	e.must(201, "POST", "/api/v1/namespaces/default/pods", pod("unbound", nil))
	bound := pod("bound", nil)
	bound.Spec.NodeName = "n1"
	e.must(201, "POST", "/api/v1/namespaces/default/pods", bound)
	ev := func(name, opts string) string {
		return `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"` + name + `","namespace":"default"}` + opts + `}`
	}
	for _, tc := range []struct {
		name, pod, body string
		code            int
		gone            bool
	}{
		{"name mismatch", "unbound", ev("other", ""), 400, false},
		{"unknown field", "unbound", ev("unbound", `,"deleteOptions":{"gracePeriod":1}`), 400, false},
		{"dry run", "unbound", ev("unbound", `,"deleteOptions":{"dryRun":["All"]}`), 201, false},
		{"missing pod", "nope", ev("nope", ""), 404, false},
		{"unbound pod: removed", "unbound", ev("unbound", ""), 201, true},
		{"bound pod: graceful", "bound", ev("bound", `,"deleteOptions":{"gracePeriodSeconds":30}`), 201, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do("POST", path+tc.pod+"/eviction", tc.body)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			if code == 201 {
				if st := decode[api.Status](t, b); st.Kind != "Status" || st.Status != "Success" || st.Code != 201 {
					t.Errorf("answer %s, want a Success Status", b)
				}
			}
			if code == 404 {
				return
			}
			code, b = e.do("GET", path+tc.pod, nil)
			if gone := code == 404; gone != tc.gone {
				t.Errorf("gone %v, want %v: %s", gone, tc.gone, b)
			}
		})
	}
	p := decode[api.Pod](t, e.must(200, "GET", path+"bound", nil))
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Errorf("bound pod after eviction: deletionTimestamp %v, grace %v", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	var v version.Info
	if err := json.Unmarshal(e.must(200, "GET", "/version", nil), &v); err != nil {
		t.Fatal(err)
	}
	if v.Major != KubernetesMajor || v.Minor != KubernetesMinor || v.GitVersion != "v1.32.0+skiff-dev" || v.GoVersion == "" || v.Compiler != "gc" || v.Platform == "" {
		t.Errorf("version %+v", v)
	}
}

func TestServerSideApply(t *testing.T) {
	e := newEnv(t)
	apply := []string{"Content-Type", "application/apply-patch+yaml"}
	const cfg = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: %s\n"
	conf := func(v string) string { return strings.ReplaceAll(cfg, "%s", v) }
	for _, tc := range []struct {
		name, query, body string
		code              int
		msg               string
	}{
		{"no fieldManager", "", conf("a"), 422, "fieldManager: Required value"},
		{"create", "?fieldManager=alice", conf("a"), 201, `"manager":"alice","operation":"Apply"`},
		{"again, the same", "?fieldManager=alice", conf("a"), 200, `"k":"a"`},
		{"another manager: conflict", "?fieldManager=bob", conf("b"), 409, `Apply failed with 1 conflict: conflict with \"alice\": .data.k`},
		{"another manager, forced", "?fieldManager=bob&force=true", conf("b"), 200, `"manager":"bob","operation":"Apply"`},
		{"a field skiff lacks", "?fieldManager=alice", conf("a") + "immutabel: true\n", 400, "immutabel"},
		{"managedFields in the configuration", "?fieldManager=alice", strings.Replace(conf("a"), "  name: ssa\n", "  name: ssa\n  managedFields: [{manager: x}]\n", 1), 400, "metadata.managedFields must be nil"},
		{"bad force", "?fieldManager=alice&force=maybe", conf("a"), 400, "invalid force"},
		{"not YAML", "?fieldManager=alice", "data: [", 400, "decode apply configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do("PATCH", cmPath+"/ssa"+tc.query, tc.body, apply...)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			if !strings.Contains(string(b), tc.msg) {
				t.Errorf("answer lacks %s: %s", tc.msg, b)
			}
		})
	}
	// An ordinary update is tracked too.
	code, b := e.do("PATCH", cmPath+"/ssa?fieldManager=carol", `{"data":{"other":"x"}}`, "Content-Type", "application/merge-patch+json")
	if code != 200 || !strings.Contains(string(b), `"manager":"carol","operation":"Update"`) {
		t.Errorf("merge patch: %d %s", code, b)
	}
}
