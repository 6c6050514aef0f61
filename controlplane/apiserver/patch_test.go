package apiserver

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

const (
	smp   = "application/strategic-merge-patch+json"
	merge = "application/merge-patch+json"
	jsonp = "application/json-patch+json"
)

// gpuPod has what a merge patch of one container would drop: a command,
// env, ports, a GPU limit and a second container.
const gpuPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"train","namespace":"default","labels":{"app":"train"}},
 "spec":{"restartPolicy":"Never","containers":[
  {"name":"cuda","image":"nvidia/cuda:12.4.0-base-ubuntu22.04","command":["nvidia-smi"],
   "env":[{"name":"A","value":"1"}],"ports":[{"containerPort":8080}],
   "resources":{"limits":{"nvidia.com/gpu":"1"}}},
  {"name":"sidecar","image":"busybox:1.36","command":["sleep","3600"]}]}}`

func TestStrategicPatchOfOneContainerKeepsTheRest(t *testing.T) {
	e := newEnv(t)
	pods := "/api/v1/namespaces/default/pods"
	e.must(201, "POST", pods, gpuPod)
	before := decode[api.Pod](t, e.must(200, "GET", pods+"/train", nil))
	out := decode[api.Pod](t, e.must(200, "PATCH", pods+"/train",
		`{"spec":{"containers":[{"name":"cuda","image":"nvidia/cuda:12.5.0-base-ubuntu22.04"}]}}`, "Content-Type", smp))
	after := decode[api.Pod](t, e.must(200, "GET", pods+"/train", nil))
	if !reflect.DeepEqual(out, after) {
		t.Errorf("the response is not the stored object:\n%+v\n%+v", out, after)
	}
	want := before.Spec
	want.Containers = append([]api.Container(nil), before.Spec.Containers...)
	want.Containers[0].Image = "nvidia/cuda:12.5.0-base-ubuntu22.04"
	if !reflect.DeepEqual(after.Spec, want) {
		t.Errorf("spec after the patch:\n%+v\nwant\n%+v", after.Spec, want)
	}
	if q := after.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("the GPU limit is gone: %+v", after.Spec.Containers[0].Resources)
	}
	if !reflect.DeepEqual(after.Labels, before.Labels) {
		t.Errorf("labels %v, want %v", after.Labels, before.Labels)
	}
}

// twoContainers is a Deployment whose template has two containers.
func twoContainers(name string) *api.Deployment {
	d := deployment(name, 2)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = []string{"-g", "daemon off;"}
	c.Env = []api.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, api.Container{Name: "side", Image: "busybox:1.36"})
	return d
}

func TestPatchTypes(t *testing.T) {
	e := newEnv(t)
	dp := "/apis/apps/v1/namespaces/default/deployments"
	for i, tc := range []struct {
		name, contentType, patch string
		code                     int
		reason                   api.StatusReason
		msg                      string // in the failure's message
		check                    func(d *api.Deployment) error
	}{
		{name: "strategic: one container by name", contentType: smp,
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}}}`, code: 200,
			check: func(d *api.Deployment) error {
				cs := d.Spec.Template.Spec.Containers
				if len(cs) != 2 || cs[0].Image != "nginx:1.28" || len(cs[0].Args) != 2 || len(cs[0].Env) != 2 || cs[1].Image != "busybox:1.36" {
					return fmt.Errorf("containers %+v", cs)
				}
				return nil
			}},
		{name: "strategic: env by name, charset parameter", contentType: smp + "; charset=utf-8",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","env":[{"name":"B","value":"3"}]}]}}}}`, code: 200,
			check: func(d *api.Deployment) error {
				if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 2 || env[0].Value != "1" || env[1].Value != "3" {
					return fmt.Errorf("env %+v", env)
				}
				return nil
			}},
		{name: "strategic: $patch delete", contentType: smp,
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}}}`, code: 200,
			check: func(d *api.Deployment) error {
				if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "c" {
					return fmt.Errorf("containers %+v", cs)
				}
				return nil
			}},
		{name: "strategic: $retainKeys drops rollingUpdate for Recreate", contentType: smp,
			patch: `{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}}`, code: 200,
			check: func(d *api.Deployment) error {
				if s := d.Spec.Strategy; s.Type != "Recreate" || s.RollingUpdate != nil {
					return fmt.Errorf("strategy %+v", s)
				}
				return nil
			}},
		{name: "merge: a list replaces", contentType: merge,
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}}}`, code: 200,
			check: func(d *api.Deployment) error {
				if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || len(cs[0].Env) != 0 {
					return fmt.Errorf("containers %+v", cs)
				}
				return nil
			}},
		{name: "json: replace", contentType: jsonp, patch: `[{"op":"replace","path":"/spec/replicas","value":4}]`, code: 200,
			check: func(d *api.Deployment) error {
				if *d.Spec.Replicas != 4 {
					return fmt.Errorf("replicas %d", *d.Spec.Replicas)
				}
				return nil
			}},
		{name: "json: add and remove", contentType: jsonp,
			patch: `[{"op":"add","path":"/metadata/labels","value":{"tier":"web"}},{"op":"remove","path":"/spec/template/spec/containers/1"}]`, code: 200,
			check: func(d *api.Deployment) error {
				if d.Labels["tier"] != "web" || len(d.Spec.Template.Spec.Containers) != 1 {
					return fmt.Errorf("labels %v containers %+v", d.Labels, d.Spec.Template.Spec.Containers)
				}
				return nil
			}},
		{name: "json: a failed test", contentType: jsonp,
			patch: `[{"op":"replace","path":"/spec/replicas","value":4},{"op":"test","path":"/spec/replicas","value":2}]`,
			code:  422, reason: api.ReasonInvalid, msg: "the server rejected our request due to an error in our request"},
		{name: "json: remove a missing path", contentType: jsonp, patch: `[{"op":"remove","path":"/spec/paused"}]`,
			code: 422, reason: api.ReasonInvalid, msg: "the server rejected our request"},
		{name: "json: not a list", contentType: jsonp, patch: `{"spec":{}}`, code: 400, reason: api.ReasonBadRequest},
		{name: "strategic: not an object", contentType: smp, patch: `[]`, code: 400, reason: api.ReasonBadRequest},
		{name: "strategic: unknown field", contentType: smp, patch: `{"spec":{"replica":3}}`, code: 400, reason: api.ReasonBadRequest, msg: "spec.replica"},
		{name: "strategic: a string where a list belongs", contentType: smp,
			patch: `{"spec":{"template":{"spec":{"containers":"nginx"}}}}`, code: 400, reason: api.ReasonBadRequest, msg: "containers"},
		{name: "strategic: bad $patch", contentType: smp,
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","$patch":"frob"}]}}}}`, code: 400, reason: api.ReasonBadRequest},
		{name: "strategic: an immutable field", contentType: smp,
			patch: `{"spec":{"selector":{"matchLabels":{"app":"other"}},"template":{"metadata":{"labels":{"app":"other"}}}}}`,
			code:  422, reason: api.ReasonInvalid, msg: "spec.selector"},
		{name: "strategic: a stale resourceVersion", contentType: smp, patch: `{"metadata":{"resourceVersion":"1"}}`,
			code: 409, reason: api.ReasonConflict},
		{name: "merge: another name", contentType: merge, patch: `{"metadata":{"name":"q"}}`, code: 400, reason: api.ReasonBadRequest},
		{name: "server-side apply without fieldManager", contentType: "application/apply-patch+yaml", patch: `spec: {}`, code: 422, reason: api.ReasonInvalid,
			msg: `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{name: "plain JSON", contentType: "application/json", patch: `{}`, code: 415, reason: "UnsupportedMediaType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("d%d", i)
			e.must(201, "POST", dp, twoContainers(name))
			before := e.must(200, "GET", dp+"/"+name, nil)
			code, b := e.do("PATCH", dp+"/"+name, tc.patch, "Content-Type", tc.contentType)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			after := e.must(200, "GET", dp+"/"+name, nil)
			if tc.code != http.StatusOK {
				st := status(t, b, tc.code, tc.reason)
				if !strings.Contains(st.Message, tc.msg) {
					t.Errorf("message %q lacks %q", st.Message, tc.msg)
				}
				if string(before) != string(after) {
					t.Errorf("a failed patch changed the object:\n%s\n%s", before, after)
				}
				return
			}
			if err := tc.check(decode[api.Deployment](t, after)); err != nil {
				t.Error(err)
			}
		})
	}
	status(t, e.must(404, "PATCH", dp+"/nope", `{}`, "Content-Type", smp), 404, api.ReasonNotFound)
}

// The JSON patch failure says what failed in its cause.
func TestJSONPatchFailureCause(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", cmPath, configMap("", "p"))
	b := e.must(422, "PATCH", cmPath+"/p", `[{"op":"test","path":"/data/k","value":"other"}]`, "Content-Type", jsonp)
	st := status(t, b, 422, api.ReasonInvalid)
	if st.Details == nil || len(st.Details.Causes) != 1 || !strings.Contains(st.Details.Causes[0].Message, "test") {
		t.Errorf("details %+v", st.Details)
	}
}

func TestMergePatchConfigMap(t *testing.T) {
	e := newEnv(t)
	cm := configMap("", "p")
	cm.Labels = map[string]string{"a": "1", "b": "2"}
	e.must(201, "POST", cmPath, cm)
	for _, ct := range []string{merge, smp + "; charset=utf-8"} {
		e.must(200, "PATCH", cmPath+"/p", `{"metadata":{"labels":{"a":null,"c":"3"}},"data":{"k2":"v2"}}`, "Content-Type", ct)
	}
	got := decode[api.ConfigMap](t, e.must(200, "GET", cmPath+"/p", nil))
	if _, ok := got.Labels["a"]; ok || got.Labels["b"] != "2" || got.Labels["c"] != "3" || got.Data["k"] != "v" || got.Data["k2"] != "v2" {
		t.Fatalf("patched: labels %v data %v", got.Labels, got.Data)
	}
}

func TestPatchScale(t *testing.T) {
	e := newEnv(t)
	dp := "/apis/apps/v1/namespaces/default/deployments"
	e.must(201, "POST", dp, deployment("web", 3))
	for _, tc := range []struct {
		contentType, patch string
		want               int32
	}{
		{smp, `{"spec":{"replicas":2}}`, 2},
		{merge, `{"spec":{"replicas":4}}`, 4},
		{jsonp, `[{"op":"replace","path":"/spec/replicas","value":1}]`, 1},
	} {
		sc := decode[api.Scale](t, e.must(200, "PATCH", dp+"/web/scale", tc.patch, "Content-Type", tc.contentType))
		d := decode[api.Deployment](t, e.must(200, "GET", dp+"/web", nil))
		if sc.Spec.Replicas != tc.want || *d.Spec.Replicas != tc.want {
			t.Errorf("%s: scale %d deployment %d, want %d", tc.contentType, sc.Spec.Replicas, *d.Spec.Replicas, tc.want)
		}
	}
	status(t, e.must(415, "PATCH", dp+"/web/scale", `{}`, "Content-Type", "application/apply-patch+yaml"), 415, "UnsupportedMediaType")
	status(t, e.must(422, "PATCH", dp+"/web/scale", `[{"op":"test","path":"/spec/replicas","value":9}]`, "Content-Type", jsonp), 422, api.ReasonInvalid)
	status(t, e.must(400, "PATCH", dp+"/web/scale", `{"spec":{"replica":9}}`, "Content-Type", smp), 400, api.ReasonBadRequest)
}

// A kind without a Kubernetes struct (a custom kind) is not offered
// strategic merge patches, as kube-apiserver answers for custom resources.
func TestPatchTypeOfCustomKind(t *testing.T) {
	_, err := patchTypeOf(smp, "example.com/v1", "Widget")
	st := api.StatusOf(err)
	if st.Code != 415 || st.Message != "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json" {
		t.Errorf("got %d %q", st.Code, st.Message)
	}
	if pt, err := patchTypeOf(jsonp, "example.com/v1", "Widget"); err != nil || pt != jsonp {
		t.Errorf("json patch of a custom kind: %v %v", pt, err)
	}
	// The custom resources skiff serves (Kueue's, the PodGroup) likewise.
	for _, k := range api.Kinds {
		if !k.CustomResource {
			continue
		}
		if _, err := patchTypeOf(smp, k.APIVersion(), k.Kind); api.StatusOf(err).Code != 415 {
			t.Errorf("strategic merge patch of %s: %v, want 415", k.Kind, err)
		}
		if pt, err := patchTypeOf("application/merge-patch+json", k.APIVersion(), k.Kind); err != nil || pt != "application/merge-patch+json" {
			t.Errorf("merge patch of %s: %v %v", k.Kind, pt, err)
		}
	}
}
