package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

const nginxDemo = `apiVersion: v1
kind: Namespace
metadata:
  name: gpu-demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: nginx-page
  namespace: gpu-demo
data:
  index.html: "<h1>hello</h1>"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-demo
  namespace: gpu-demo
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx-demo
  template:
    metadata:
      labels:
        app: nginx-demo
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
        resources:
          requests: {cpu: 250m, memory: 64Mi}
          limits: {cpu: 500m, memory: 128Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: nginx-demo
  namespace: gpu-demo
spec:
  type: NodePort
  selector:
    app: nginx-demo
  ports:
  - port: 80
    targetPort: 80
    nodePort: 30080
`

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyCreatedConfiguredUnchanged(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "nginx-demo.yaml", nginxDemo)
	fc := newFake()

	res := run(t, fc, "", "apply", "-f", f)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.err)
	}
	wantLines(t, res.out,
		"namespace/gpu-demo created",
		"configmap/nginx-page created",
		"deployment.apps/nginx-demo created",
		"service/nginx-demo created")

	// The server (here the fake) fills in fields the file leaves out; the
	// controller stamps the revision annotation. Apply again: unchanged.
	svc, err := client.Get[*api.Service](t.Context(), fc, "gpu-demo", "nginx-demo")
	if err != nil {
		t.Fatal(err)
	}
	svc = api.Clone(svc)
	svc.Spec.ClusterIP = "10.96.0.10"
	if _, err := fc.Update(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	d, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	d = api.Clone(d)
	d.Annotations = map[string]string{api.AnnotationRevision: "1"}
	if _, err := fc.Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}

	res = run(t, fc, "", "apply", "-f", f)
	wantLines(t, res.out,
		"namespace/gpu-demo unchanged",
		"configmap/nginx-page unchanged",
		"deployment.apps/nginx-demo unchanged",
		"service/nginx-demo unchanged")

	// Change the image and the page: configured, the rest unchanged.
	changed := strings.Replace(strings.Replace(nginxDemo, "nginx:alpine", "nginx:1.25-alpine", 1), "hello", "bye", 1)
	writeFile(t, dir, "nginx-demo.yaml", changed)
	res = run(t, fc, "", "apply", "-f", dir) // a directory works too
	wantLines(t, res.out,
		"namespace/gpu-demo unchanged",
		"configmap/nginx-page configured",
		"deployment.apps/nginx-demo configured",
		"service/nginx-demo unchanged")
	d, _ = client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25-alpine" {
		t.Errorf("image = %s", img)
	}
	if d.Annotations[api.AnnotationRevision] != "1" {
		t.Errorf("apply dropped the controller's revision annotation: %v", d.Annotations)
	}
	svc, _ = client.Get[*api.Service](t.Context(), fc, "gpu-demo", "nginx-demo")
	if svc.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("apply dropped the allocated clusterIP: %q", svc.Spec.ClusterIP)
	}
}

func TestApplyStdinAndNamespaceFlag(t *testing.T) {
	fc := newFake()
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gpu-test\nspec:\n  restartPolicy: Never\n  containers:\n  - name: cuda\n    image: nvidia/cuda:12.4.0-base-ubuntu22.04\n"
	res := run(t, fc, pod, "apply", "-f", "-", "-n", "gpu-demo")
	wantLines(t, res.out, "pod/gpu-test created")
	if _, err := client.Get[*api.Pod](t.Context(), fc, "gpu-demo", "gpu-test"); err != nil {
		t.Errorf("pod not in -n namespace: %v", err)
	}
	res = run(t, fc, strings.Replace(pod, "name: gpu-test", "name: x\n  namespace: other", 1), "apply", "-f", "-", "-n", "gpu-demo")
	if res.code == 0 || !strings.Contains(res.err, `the namespace from the provided object "other" does not match the namespace "gpu-demo"`) {
		t.Errorf("namespace mismatch: %+v", res)
	}
}

func TestApplyBadDocumentAppliesNothingFromItsFile(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", nginxDemo+`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: broken
  namespace: gpu-demo
dataa:
  x: y
`)
	good := writeFile(t, dir, "good.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n")
	fc := newFake()
	res := run(t, fc, "", "apply", "-f", bad, "-f", good)
	if res.code != 1 {
		t.Errorf("exit = %d, want 1", res.code)
	}
	wantLines(t, res.out, "namespace/other created")
	wantContains(t, res.err, bad+": document 5", "dataa", "nothing applied from this file: 1 of 5 documents are invalid")
	for _, a := range fc.Actions() {
		if a.IsWrite() && a.Name != "other" {
			t.Errorf("wrote %s from the bad file", a)
		}
	}
}

func TestApplyServerRejectionIsPerObject(t *testing.T) {
	fc := newFake()
	if _, err := fc.Create(t.Context(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "gpu-demo"}}); err != nil {
		t.Fatal(err)
	}
	fc.Intercept(func(a fake.Action) error {
		if a.Verb == "create" && a.Kind == "ConfigMap" {
			return api.NewStatusError(403, api.ReasonForbidden, `configmaps "nginx-page" is forbidden: no`)
		}
		return nil
	})
	f := writeFile(t, t.TempDir(), "a.yaml", nginxDemo)
	res := run(t, fc, "", "apply", "-f", f)
	if res.code != 1 {
		t.Errorf("exit = %d", res.code)
	}
	wantLines(t, res.out, "namespace/gpu-demo unchanged", "deployment.apps/nginx-demo created", "service/nginx-demo created")
	wantContains(t, res.err, `Error from server (Forbidden): error when applying document 2 (ConfigMap "nginx-page") from "`+f+`": configmaps "nginx-page" is forbidden: no`)
}

func TestCreate(t *testing.T) {
	fc := newFake()
	res := run(t, fc, "", "create", "namespace", "gpu-demo")
	wantLines(t, res.out, "namespace/gpu-demo created")
	res = run(t, fc, "", "create", "deployment", "web", "--image=nginx:alpine", "--replicas=2", "--port=80", "-n", "gpu-demo")
	wantLines(t, res.out, "deployment.apps/web created")
	d, err := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "web")
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Name != "nginx" || d.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("deployment: %+v", d.Spec)
	}
	res = run(t, fc, "", "create", "configmap", "page", "--from-literal=a=1", "--from-literal=b=2")
	wantLines(t, res.out, "configmap/page created")
	res = run(t, fc, "", "create", "ns", "gpu-demo")
	if res.code != 1 || res.err != "Error from server (AlreadyExists): namespaces \"gpu-demo\" already exists\n" {
		t.Errorf("create twice: %+v", res)
	}
}
