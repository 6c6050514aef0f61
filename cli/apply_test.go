package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/store"
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
	d.Annotations[api.AnnotationRevision] = "1"
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
	// The namespace was not created by apply: kubectl's warning, and the
	// annotation is patched in.
	wantLines(t, res.out, "namespace/gpu-demo configured", "deployment.apps/nginx-demo created", "service/nginx-demo created")
	wantContains(t, res.err, "Warning: resource namespaces/gpu-demo is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by skiff apply.",
		"The missing annotation will be patched automatically.")
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

// newAPIServer is a real in-process API server (registry, admission,
// defaults and validation over a bbolt store), reached without HTTP.
func newAPIServer(t testing.TB) *apiserver.Local {
	t.Helper()
	db, err := defaultsDB()
	if err != nil {
		t.Fatalf("store with the defaults: %v", err)
	}
	path := filepath.Join(t.TempDir(), "skiff.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := apiserver.NewRegistry(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := reg.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	return apiserver.NewLocal(reg)
}

// defaultsDB is a store file holding what EnsureDefaults writes, made
// once per test binary: newAPIServer starts each store as a copy of it, so
// the fifty-odd servers of these tests do not each make the default RBAC
// through admission again (EnsureDefaults still runs on the copy, and
// finds it there).
var defaultsDB = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "skiff-cli-defaults-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "skiff.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	err = apiserver.NewRegistry(st, slog.New(slog.DiscardHandler)).EnsureDefaults(context.Background())
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// Every example (examples/dra and examples/kueue too: custom resources
// take a JSON merge patch, resource.k8s.io v1beta1 converts) and every
// valid test file, applied twice to a real API
// server: the second time, every object is unchanged (the server's
// defaults and allocations are not a change).
func TestApplyTwiceIsUnchanged(t *testing.T) {
	var files []string
	// (valid-secret-list.json has a Secret with stringData: see
	// TestApplySecretStringDataIsConfiguredEveryTime.)
	for _, glob := range []string{"../examples/*.yaml", "../examples/*/*.yaml", "../api/testdata/valid-*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files: %v", len(files), files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if usesGenerateName(t, f) {
				t.Skip("a file for create -f: apply needs a name, as kubectl apply")
			}
			srv := newAPIServer(t)
			createNamespacesOf(t, srv, f)
			res := run(t, srv, "", "apply", "-f", f)
			if res.code != 0 {
				t.Fatalf("first apply: exit %d: %s%s", res.code, res.out, res.err)
			}
			if strings.TrimSpace(res.out) == "" {
				t.Skip("no objects in this file")
			}
			first := strings.Split(strings.TrimSpace(res.out), "\n")
			res = run(t, srv, "", "apply", "-f", f)
			if res.code != 0 || res.err != "" {
				t.Fatalf("second apply: exit %d: %s%s", res.code, res.out, res.err)
			}
			second := strings.Split(strings.TrimSpace(res.out), "\n")
			if len(second) != len(first) {
				t.Fatalf("second apply printed %d lines, the first %d:\n%s", len(second), len(first), res.out)
			}
			for _, line := range second {
				if !strings.HasSuffix(line, " unchanged") {
					t.Errorf("second apply: %q, want unchanged", line)
				}
			}
		})
	}
}

// usesGenerateName reports whether a document of file has generateName
// and no name (Kueue's sample job: `kubectl create -f`, never apply).
func usesGenerateName(t testing.TB, file string) bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range api.DecodeStream(data) {
		if d.Err == nil && d.Object != nil && d.Object.GetObjectMeta().Name == "" && d.Object.GetObjectMeta().GenerateName != "" {
			return true
		}
	}
	return false
}

// createNamespacesOf creates the namespaces the objects of file live in
// that the file does not declare itself.
func createNamespacesOf(t testing.TB, cl client.Interface, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	need := map[string]bool{}
	for _, d := range api.DecodeStream(data) {
		if d.Err != nil || d.Object == nil {
			continue
		}
		m := d.Object.GetObjectMeta()
		switch {
		case d.Kind.Kind == "Namespace":
			declared[m.Name] = true
		case d.Kind.Namespaced && m.Namespace != "":
			need[m.Namespace] = true
		}
	}
	for ns := range need {
		if declared[ns] {
			continue
		}
		if _, err := cl.Create(t.Context(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil && !api.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

const applyPod = `apiVersion: v1
kind: Pod
metadata:
  name: gpu-test
  namespace: default
  labels: {app: gpu, tier: lab}
spec:
  restartPolicy: Never
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.0-base-ubuntu22.04
    command: ["nvidia-smi"]
    resources:
      limits: {nvidia.com/gpu: 1}
`

func TestApplyThreeWayAgainstAPIServer(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	f := writeFile(t, dir, "pod.yaml", applyPod)
	ctx := t.Context()

	res := run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out, "pod/gpu-test created")
	p, err := client.Get[*api.Pod](ctx, srv, "default", "gpu-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Annotations[patch.LastAppliedAnnotation]; !ok {
		t.Fatalf("create wrote no %s: %v", patch.LastAppliedAnnotation, p.Annotations)
	}
	// The scheduler binds it; someone adds a label by hand.
	if err := srv.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "gpu-test"}, Target: api.ObjectReference{Kind: "Node", Name: "node-1"}}); err != nil {
		t.Fatal(err)
	}
	p, _ = client.Get[*api.Pod](ctx, srv, "default", "gpu-test")
	p = api.Clone(p)
	p.Labels["owner"] = "ana"
	if _, err := srv.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	res = run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out, "pod/gpu-test unchanged")

	// The file drops a label and changes the image: configured; the hand
	// label and the node stay.
	writeFile(t, dir, "pod.yaml", strings.NewReplacer("labels: {app: gpu, tier: lab}", "labels: {app: gpu}",
		"cuda:12.4.0", "cuda:12.5.0").Replace(applyPod))
	res = run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out, "pod/gpu-test configured")
	p, _ = client.Get[*api.Pod](ctx, srv, "default", "gpu-test")
	if _, ok := p.Labels["tier"]; ok || p.Labels["owner"] != "ana" || p.Labels["app"] != "gpu" {
		t.Errorf("labels %v", p.Labels)
	}
	if p.Spec.NodeName != "node-1" || p.Spec.Containers[0].Image != "nvidia/cuda:12.5.0-base-ubuntu22.04" {
		t.Errorf("node %q image %q", p.Spec.NodeName, p.Spec.Containers[0].Image)
	}
	if q := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("GPU limit %v", p.Spec.Containers[0].Resources.Limits)
	}

	// A change Kubernetes forbids: the server's message, nothing written.
	before := p.ResourceVersion
	writeFile(t, dir, "pod.yaml", strings.Replace(applyPod, `["nvidia-smi"]`, `["nvidia-smi", "-L"]`, 1))
	res = run(t, srv, "", "apply", "-f", f)
	if res.code == 0 {
		t.Fatalf("a forbidden change applied: %+v", res)
	}
	wantContains(t, res.err, `Pod "gpu-test" is invalid`, "pod updates may not change fields other than")
	p, _ = client.Get[*api.Pod](ctx, srv, "default", "gpu-test")
	if p.ResourceVersion != before {
		t.Errorf("a rejected apply wrote the pod")
	}
}

func TestApplyKeepsWhatTheServerAndControllersSet(t *testing.T) {
	srv := newAPIServer(t)
	f := writeFile(t, t.TempDir(), "nginx-demo.yaml", nginxDemo)
	ctx := t.Context()
	res := run(t, srv, "", "apply", "-f", f)
	if res.code != 0 {
		t.Fatalf("apply: %+v", res)
	}
	svc, err := client.Get[*api.Service](ctx, srv, "gpu-demo", "nginx-demo")
	if err != nil || svc.Spec.ClusterIP == "" {
		t.Fatalf("service %+v: %v", svc, err)
	}
	// A controller stamps the revision; `rollout restart` the template.
	d, _ := client.Get[*api.Deployment](ctx, srv, "gpu-demo", "nginx-demo")
	d = api.Clone(d)
	d.Annotations[api.AnnotationRevision] = "2"
	d.Spec.Template.Annotations = map[string]string{api.AnnotationRestartedAt: "2025-03-01T12:00:00Z"}
	if _, err := srv.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	res = run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out,
		"namespace/gpu-demo unchanged",
		"configmap/nginx-page unchanged",
		"deployment.apps/nginx-demo unchanged",
		"service/nginx-demo unchanged")
	res = run(t, srv, "", "apply", "-f", writeFile(t, t.TempDir(), "scaled.yaml", strings.Replace(nginxDemo, "replicas: 3", "replicas: 4", 1)))
	wantLines(t, res.out,
		"namespace/gpu-demo unchanged",
		"configmap/nginx-page unchanged",
		"deployment.apps/nginx-demo configured",
		"service/nginx-demo unchanged")
	d, _ = client.Get[*api.Deployment](ctx, srv, "gpu-demo", "nginx-demo")
	if *d.Spec.Replicas != 4 || d.Annotations[api.AnnotationRevision] != "2" || d.Spec.Template.Annotations[api.AnnotationRestartedAt] == "" {
		t.Errorf("replicas %d annotations %v template annotations %v", *d.Spec.Replicas, d.Annotations, d.Spec.Template.Annotations)
	}
	got, _ := client.Get[*api.Service](ctx, srv, "gpu-demo", "nginx-demo")
	if got.Spec.ClusterIP != svc.Spec.ClusterIP || got.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("service spec %+v, was %+v", got.Spec, svc.Spec)
	}
}

// An object created without apply: kubectl's warning, configured (the
// annotation is added), then unchanged.
func TestApplyWithoutLastApplied(t *testing.T) {
	srv := newAPIServer(t)
	if _, err := srv.Create(t.Context(), &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "page"}, Data: map[string]string{"a": "1"}}); err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, t.TempDir(), "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: page\ndata:\n  a: \"1\"\n")
	res := run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out, "configmap/page configured")
	wantContains(t, res.err, "Warning: resource configmaps/page is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by skiff apply.")
	res = run(t, srv, "", "apply", "-f", f)
	wantLines(t, res.out, "configmap/page unchanged")
	if res.err != "" {
		t.Errorf("stderr: %s", res.err)
	}
}

// The server turns stringData into data and keeps no stringData, so the
// three-way patch always sets stringData again: kubectl sends it and says
// "configured" every time (kubernetes/kubernetes#87736). skiff applies
// the patch, finds the result (stringData folded into data) the live
// object, and says "unchanged"; a changed value is "configured".
func TestApplySecretStringData(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, file, first, user string }{
		{"s1", "stringData:\n  user: admin\n", "created", "admin"},
		{"s1", "stringData:\n  user: root\n", "configured", "root"},
		{"s2", "data:\n  user: YWRtaW4=\n", "created", "admin"},
	} {
		f := writeFile(t, dir, "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: "+tc.name+"\n  namespace: default\n"+tc.file)
		wantLines(t, run(t, srv, "", "apply", "-f", f).out, "secret/"+tc.name+" "+tc.first)
		before, err := client.Get[*api.Secret](t.Context(), srv, "default", tc.name)
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, run(t, srv, "", "apply", "-f", f).out, "secret/"+tc.name+" unchanged")
		after, err := client.Get[*api.Secret](t.Context(), srv, "default", tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s: the second apply wrote the secret", tc.name)
		}
		if got := string(after.Data["user"]); got != tc.user {
			t.Errorf("%s: data.user %q, want %q", tc.name, got, tc.user)
		}
	}
}
