package apiserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
)

// The request protocols beyond plain JSON (protobuf bodies, dryRun=All,
// pods/eviction, /version, server-side apply), typed with the real
// kubectl 1.32 against the API handler. Until the OpenAPI and Table
// output land (other files), writes pass --validate=false and output is
// asked for with -o name.

func serveKubectl(t *testing.T) (*env, *kubectltest.Cluster) {
	t.Helper()
	e := newEnv(t)
	return e, kubectltest.Serve(t, e.srv.Handler(), testToken)
}

// kubectl create sends protobuf bodies for these; each is stored.
func TestKubectlCreateProtobuf(t *testing.T) {
	t.Parallel()
	e, c := serveKubectl(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
		kind *api.Kind
		ns   string
	}{
		{"namespace", []string{"create", "namespace", "x"}, "namespace/x", namespaceKind, ""},
		{"deployment", []string{"create", "deployment", "web", "--image=nginx"}, "deployment.apps/web", deploymentKind, "default"},
		{"configmap", []string{"create", "configmap", "c", "--from-literal=a=b"}, "configmap/c", api.MustKindOf(&api.ConfigMap{}), "default"},
		{"secret", []string{"create", "secret", "generic", "s", "--from-literal=a=b"}, "secret/s", api.MustKindOf(&api.Secret{}), "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := c.Must(t, "", append(tc.args, "-o", "name", "--validate=false")...)
			if strings.TrimSpace(out) != tc.want {
				t.Fatalf("stdout %q, want %q", out, tc.want)
			}
			name := tc.want[strings.Index(tc.want, "/")+1:]
			obj, err := e.reg.Get(context.Background(), tc.kind, tc.ns, name)
			if err != nil {
				t.Fatal(err)
			}
			switch o := obj.(type) {
			case *api.Deployment:
				if c := o.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "nginx" {
					t.Errorf("containers %+v", c)
				}
			case *api.ConfigMap:
				if o.Data["a"] != "b" {
					t.Errorf("data %v", o.Data)
				}
			case *api.Secret:
				if string(o.Data["a"]) != "b" {
					t.Errorf("data %v", o.Data)
				}
			}
			if mf := obj.GetObjectMeta().ManagedFields; len(mf) != 1 || mf[0].Manager != "kubectl-create" || mf[0].Operation != "Update" {
				t.Errorf("managedFields %+v, want kubectl-create's Update", mf)
			}
		})
	}
}

const webConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: default
data:
  greeting: %s
`

// apply --dry-run=server and diff answer without storing.
func TestKubectlDryRunAndDiff(t *testing.T) {
	t.Parallel()
	e, c := serveKubectl(t)
	dir := t.TempDir()
	file := func(greeting string) string {
		p := filepath.Join(dir, greeting+".yaml")
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(webConfigMap, "%s", greeting)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cmKind := api.MustKindOf(&api.ConfigMap{})
	out := c.Must(t, "", "apply", "--dry-run=server", "--validate=false", "-f", file("hello"), "-o", "name")
	if strings.TrimSpace(out) != "configmap/web" {
		t.Fatalf("dry-run apply: %q", out)
	}
	if _, err := e.reg.Get(context.Background(), cmKind, "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("dry run stored the object: %v", err)
	}
	c.Must(t, "", "apply", "--validate=false", "-f", file("hello"))
	before, err := e.reg.Get(context.Background(), cmKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, greeting string
		exit           int
	}{
		{"same", "hello", 0},
		{"changed", "bonjour", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Run(t, "", "diff", "-f", file(tc.greeting))
			code := 0
			var ee *exec.ExitError
			if errors.As(r.Err, &ee) {
				code = ee.ExitCode()
			} else if r.Err != nil {
				t.Fatal(r.Err)
			}
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.exit, r.Stdout, r.Stderr)
			}
			if tc.exit == 1 && (!strings.Contains(r.Stdout, "-  greeting: hello") || !strings.Contains(r.Stdout, "+  greeting: bonjour")) {
				t.Errorf("diff lacks the change:\n%s", r.Stdout)
			}
			if tc.exit == 0 && r.Stdout != "" {
				t.Errorf("diff of the same object: %q", r.Stdout)
			}
		})
	}
	after, err := e.reg.Get(context.Background(), cmKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if after.GetObjectMeta().ResourceVersion != before.GetObjectMeta().ResourceVersion {
		t.Errorf("diff changed the object: resourceVersion %s -> %s", before.GetObjectMeta().ResourceVersion, after.GetObjectMeta().ResourceVersion)
	}
}

// drain evicts the node's pods (protobuf Evictions). With no agent to stop
// them, --grace-period=0 makes each eviction remove its pod at once, as
// the agent's final delete would.
func TestKubectlDrain(t *testing.T) {
	t.Parallel()
	e, c := serveKubectl(t)
	ctx := context.Background()
	if _, err := e.reg.Create(ctx, nodeKind, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	p := pod("p1", nil)
	p.Spec.NodeName = "n1"
	if _, err := e.reg.Create(ctx, podKind, p); err != nil {
		t.Fatal(err)
	}
	r := c.Run(t, "", "drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period=0", "--timeout=30s")
	if r.Err != nil {
		t.Fatalf("drain: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "pod/p1 evicted") || !strings.Contains(r.Stdout, "node/n1 drained") {
		t.Errorf("drain output:\n%s\n%s", r.Stdout, r.Stderr)
	}
	if _, err := e.reg.Get(ctx, podKind, "default", "p1"); !api.IsNotFound(err) {
		t.Errorf("pod after drain: %v", err)
	}
	n, err := e.reg.Get(ctx, nodeKind, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if !n.(*api.Node).Spec.Unschedulable {
		t.Error("drained node is schedulable")
	}
}

func TestKubectlVersion(t *testing.T) {
	t.Parallel()
	_, c := serveKubectl(t)
	out := c.Must(t, "", "version")
	if !strings.Contains(out, "Server Version: v1.32.0+skiff-dev") {
		t.Errorf("kubectl version:\n%s", out)
	}
	if strings.Contains(out, "WARNING") {
		t.Errorf("version skew warning:\n%s", out)
	}
}

// apply --server-side twice (the second is unchanged), then a conflict
// with another manager, then --force-conflicts takes the field over.
func TestKubectlServerSideApply(t *testing.T) {
	t.Parallel()
	e, c := serveKubectl(t)
	file, err := filepath.Abs("../../examples/lab1-nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "--server-side", "--validate=false", "-f", file}
	first := c.Must(t, "", args...)
	for _, want := range []string{"namespace/gpu-demo serverside-applied", "deployment.apps/nginx-demo serverside-applied"} {
		if !strings.Contains(first, want) {
			t.Errorf("first apply lacks %q:\n%s", want, first)
		}
	}
	d1, err := e.reg.Get(context.Background(), deploymentKind, "gpu-demo", "nginx-demo")
	if err != nil {
		t.Fatal(err)
	}
	if mf := d1.GetObjectMeta().ManagedFields; len(mf) != 1 || mf[0].Manager != "kubectl" || mf[0].Operation != "Apply" {
		t.Errorf("managedFields %+v, want kubectl's Apply", mf)
	}
	c.Must(t, "", args...)
	d2, err := e.reg.Get(context.Background(), deploymentKind, "gpu-demo", "nginx-demo")
	if err != nil {
		t.Fatal(err)
	}
	if d1.GetObjectMeta().ResourceVersion != d2.GetObjectMeta().ResourceVersion {
		t.Errorf("a second identical apply wrote: %s -> %s", d1.GetObjectMeta().ResourceVersion, d2.GetObjectMeta().ResourceVersion)
	}

	other := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-demo
  namespace: gpu-demo
spec:
  replicas: 5
`
	r := c.Run(t, other, "apply", "--server-side", "--validate=false", "--field-manager=teacher", "-f", "-")
	if r.Err == nil {
		t.Fatalf("conflicting apply succeeded:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, `conflict with "kubectl"`) || !strings.Contains(r.Stderr, ".spec.replicas") {
		t.Errorf("conflict message:\n%s", r.Stderr)
	}
	c.Must(t, other, "apply", "--server-side", "--validate=false", "--field-manager=teacher", "--force-conflicts", "-f", "-")
	d, err := e.reg.Get(context.Background(), deploymentKind, "gpu-demo", "nginx-demo")
	if err != nil {
		t.Fatal(err)
	}
	if r := d.(*api.Deployment).Spec.Replicas; r == nil || *r != 5 {
		t.Errorf("replicas after the forced apply: %v, want 5", r)
	}
}
