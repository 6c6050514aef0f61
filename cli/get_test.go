package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"

	"skiff.dev/skiff/api"
)

func TestParseResourceArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // "Kind:name,name;Kind:"
		wantErr string
	}{
		{"short name", []string{"po"}, "Pod:", ""},
		{"plural with names", []string{"pods", "a", "b"}, "Pod:a,b", ""},
		{"kind/name", []string{"deploy/x"}, "Deployment:x", ""},
		{"several kind/name", []string{"deploy/x", "po/y", "deployment/z"}, "Deployment:x,z;Pod:y", ""},
		{"resource.group", []string{"deployments.apps", "web"}, "Deployment:web", ""},
		{"kind list", []string{"configmap,deploy,pods,svc"}, "ConfigMap:;Deployment:;Pod:;Service:", ""},
		{"all", []string{"all"}, "Pod:;Service:;DaemonSet:;Deployment:;ReplicaSet:;StatefulSet:;HorizontalPodAutoscaler:;CronJob:;Job:", ""},
		{"singular and Kind", []string{"Node"}, "Node:", ""},
		{"ns ep ev cm no rs", []string{"ns,ep,ev,cm,no,rs"}, "Namespace:;Endpoints:;Event:;ConfigMap:;Node:;ReplicaSet:", ""},
		{"nothing", nil, "", "you must specify the type of resource"},
		{"unknown", []string{"widgets"}, "", `doesn't have a resource type "widgets"`},
		{"mixed forms", []string{"pods", "deploy/x"}, "", "no need to specify a resource type"},
		{"empty name", []string{"deploy/"}, "", "single resource and name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			refs, err := parseResourceArgs("get", tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, r := range refs {
				parts = append(parts, r.Kind.Kind+":"+strings.Join(r.Names, ","))
			}
			if got := strings.Join(parts, ";"); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func getFixtures() []api.Object {
	node := &api.Node{ObjectMeta: meta("", "node-1", 48*time.Hour)}
	node.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	node.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	node.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}}
	node.Status.NodeInfo = api.NodeSystemInfo{KubeletVersion: "skiff-v0.1.0", OSImage: "Debian 12", KernelVersion: "6.1.0", ContainerRuntimeVersion: "fake://1"}
	pending := &api.Pod{ObjectMeta: meta("gpu-demo", "gpu-test", 10*time.Second), Spec: api.PodSpec{Containers: []api.Container{{Name: "cuda", Image: "nvidia/cuda"}}},
		Status: api.PodStatus{Phase: api.PodPending}}
	svc := &api.Service{ObjectMeta: meta("gpu-demo", "nginx-demo", 3*time.Minute), Spec: api.ServiceSpec{
		Type: "NodePort", ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "nginx-demo"},
		Ports: []api.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}}}}
	ns := &api.Namespace{ObjectMeta: meta("", "gpu-demo", time.Hour), Status: api.NamespaceStatus{Phase: "Active"}}
	cm := &api.ConfigMap{ObjectMeta: meta("gpu-demo", "nginx-page", 3*time.Minute), Data: map[string]string{"index.html": "<h1>hi</h1>"}}
	return []api.Object{
		node, ns, pending, svc, cm,
		runningPod("gpu-demo", "nginx-demo-abc", "node-1", "10.244.0.5", 3*time.Minute+12*time.Second),
		runningPod("default", "web", "node-1", "10.244.0.6", 50*time.Hour),
		deployment("gpu-demo", "nginx-demo", 3, 3*time.Minute),
	}
}

func TestGetTables(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"pods", []string{"get", "pods", "-n", "gpu-demo"}, []string{
			"NAME             READY   STATUS    RESTARTS   AGE",
			"gpu-test         0/1     Pending   0          10s",
			"nginx-demo-abc   1/1     Running   0          3m12s",
		}},
		{"pods wide", []string{"get", "po", "-o", "wide"}, []string{
			"NAME   READY   STATUS    RESTARTS   AGE    IP           NODE     NOMINATED NODE   READINESS GATES",
			"web    1/1     Running   0          2d2h   10.244.0.6   node-1   <none>           <none>",
		}},
		{"pods all namespaces", []string{"get", "pods", "-A"}, []string{
			"NAMESPACE   NAME             READY   STATUS    RESTARTS   AGE",
			"default     web              1/1     Running   0          2d2h",
			"gpu-demo    gpu-test         0/1     Pending   0          10s",
			"gpu-demo    nginx-demo-abc   1/1     Running   0          3m12s",
		}},
		{"deployments", []string{"get", "deploy", "-n", "gpu-demo"}, []string{
			"NAME         READY   UP-TO-DATE   AVAILABLE   AGE",
			"nginx-demo   3/3     3            3           3m",
		}},
		{"deployments wide", []string{"get", "deployments.apps", "-n", "gpu-demo", "-o", "wide"}, []string{
			"NAME         READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES         SELECTOR",
			"nginx-demo   3/3     3            3           3m    nginx        nginx:alpine   app=nginx-demo",
		}},
		{"services", []string{"get", "svc", "-n", "gpu-demo"}, []string{
			"NAME         TYPE       CLUSTER-IP   EXTERNAL-IP   PORT(S)        AGE",
			"nginx-demo   NodePort   10.96.0.10   <none>        80:30080/TCP   3m",
		}},
		{"nodes", []string{"get", "nodes"}, []string{
			"NAME     STATUS   ROLES           AGE   VERSION",
			"node-1   Ready    control-plane   2d    skiff-v0.1.0",
		}},
		{"nodes wide", []string{"get", "no", "-o", "wide"}, []string{
			"NAME     STATUS   ROLES           AGE   VERSION        INTERNAL-IP   EXTERNAL-IP   OS-IMAGE    KERNEL-VERSION   CONTAINER-RUNTIME   GPUS   GPU-PRODUCT",
			"node-1   Ready    control-plane   2d    skiff-v0.1.0   10.0.0.1      <none>        Debian 12   6.1.0            fake://1            0      <none>",
		}},
		{"nodes ignore -A", []string{"get", "nodes", "-A", "--no-headers"}, []string{
			"node-1   Ready   control-plane   2d    skiff-v0.1.0",
		}},
		{"several kinds", []string{"get", "configmap,deploy,pods,svc", "-n", "gpu-demo"}, []string{
			"NAME                   DATA   AGE",
			"configmap/nginx-page   1      3m",
			"",
			"NAME                         READY   UP-TO-DATE   AVAILABLE   AGE",
			"deployment.apps/nginx-demo   3/3     3            3           3m",
			"",
			"NAME                 READY   STATUS    RESTARTS   AGE",
			"pod/gpu-test         0/1     Pending   0          10s",
			"pod/nginx-demo-abc   1/1     Running   0          3m12s",
			"",
			"NAME                 TYPE       CLUSTER-IP   EXTERNAL-IP   PORT(S)        AGE",
			"service/nginx-demo   NodePort   10.96.0.10   <none>        80:30080/TCP   3m",
		}},
		{"by kind/name", []string{"get", "deploy/nginx-demo", "-n", "gpu-demo", "--show-labels"}, []string{
			"NAME         READY   UP-TO-DATE   AVAILABLE   AGE   LABELS",
			"nginx-demo   3/3     3            3           3m    app=nginx-demo",
		}},
		{"label selector", []string{"get", "pods", "-A", "-l", "app=web", "--field-selector", "status.phase=Running", "--no-headers"}, []string{
			"default    web              1/1   Running   0     2d2h",
			"gpu-demo   nginx-demo-abc   1/1   Running   0     3m12s",
		}},
		{"namespaces", []string{"get", "ns"}, []string{
			"NAME       STATUS   AGE",
			"gpu-demo   Active   60m",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, newFake(getFixtures()...), "", tc.args...)
			if res.code != 0 || res.err != "" {
				t.Fatalf("exit %d, stderr %q", res.code, res.err)
			}
			wantLines(t, res.out, tc.want...)
		})
	}
}

func TestGetEmptyAndMissing(t *testing.T) {
	res := run(t, newFake(getFixtures()...), "", "get", "pods", "-n", "empty")
	if res.code != 0 || res.out != "" || res.err != "No resources found in empty namespace.\n" {
		t.Errorf("empty: %+v", res)
	}
	res = run(t, newFake(getFixtures()...), "", "get", "pods", "web", "nope")
	if res.code != 1 {
		t.Errorf("exit = %d, want 1", res.code)
	}
	wantLines(t, res.err, `Error from server (NotFound): pods "nope" not found`)
	wantContains(t, res.out, "web ")
}

func TestGetOutputFormats(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"name", []string{"get", "deploy,svc", "-n", "gpu-demo", "-o", "name"}, "deployment.apps/nginx-demo\nservice/nginx-demo\n"},
		{"jsonpath on list", []string{"get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"}, "node-1"},
		{"jsonpath quoted", []string{"get", "nodes", "-o", "jsonpath='{.items[0].metadata.name}'"}, "node-1"},
		{"jsonpath on one object", []string{"get", "pod", "web", "-o", "jsonpath={.metadata.name} {.status.podIP}"}, "web 10.244.0.6"},
		{"jsonpath range", []string{"get", "pods", "-n", "gpu-demo", "--field-selector=status.phase=Pending", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"}, "gpu-test\n"},
		{"jsonpath kind", []string{"get", "pods", "-n", "gpu-demo", "-o", "jsonpath={.kind}"}, "List"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, newFake(getFixtures()...), "", tc.args...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.err)
			}
			if res.out != tc.want {
				t.Errorf("got %q, want %q", res.out, tc.want)
			}
		})
	}

	res := run(t, newFake(getFixtures()...), "", "get", "pod", "web", "-o", "json")
	wantContains(t, res.out, "{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"Pod\",", `"name": "web"`)
	if strings.Contains(res.out, `"List"`) {
		t.Errorf("one named object printed as a List:\n%s", res.out)
	}
	res = run(t, newFake(getFixtures()...), "", "get", "pods", "-o", "json")
	wantContains(t, res.out, `"kind": "List"`, `"items": [`)
	res = run(t, newFake(getFixtures()...), "", "get", "deploy", "nginx-demo", "-n", "gpu-demo", "-o", "yaml")
	wantContains(t, res.out, "apiVersion: apps/v1\nkind: Deployment\n", "  name: nginx-demo\n", "  replicas: 3\n")
	res = run(t, newFake(getFixtures()...), "", "get", "pods", "-o", "yaml")
	wantContains(t, res.out, "apiVersion: v1\nitems:\n", "kind: List\n")

	res = run(t, newFake(), "", "get", "pods", "-o", "bogus")
	if res.code != 1 || !strings.HasPrefix(res.err, "error: unable to match a printer") {
		t.Errorf("bad -o: %+v", res)
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:                "5s",
		3*time.Minute + 12*time.Second: "3m12s",
		2 * time.Hour:                  "120m",
		5 * time.Hour:                  "5h",
		49 * time.Hour:                 "2d1h",
		9 * 24 * time.Hour:             "9d",
	} {
		if got := age(testNow, testNow.Add(-d)); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
	if got := age(testNow, time.Time{}); got != "<unknown>" {
		t.Errorf("zero age = %q", got)
	}
}

func TestGetWatch(t *testing.T) {
	fc := newFake(getFixtures()...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string)
	out := &syncBuffer{}
	go func() {
		var errb bytes.Buffer
		r := NewRoot(out, &errb)
		r.Now = func() time.Time { return testNow }
		r.NewClient = func() (client.Interface, error) { return fc, nil }
		_ = r.Execute(ctx, []string{"get", "pods", "-w", "--no-headers"})
		done <- out.String()
	}()
	testwait.For(t, 5*time.Second, "the watch to start", func() bool { return fc.WatchCount() > 0 })
	p := runningPod("default", "new", "", "", 0)
	p.Status = api.PodStatus{}
	if _, err := fc.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the new pod in the output", func() bool { return strings.Contains(out.String(), "new ") })
	cancel() // as Ctrl-C
	wantContains(t, <-done, "web   1/1   Running   0     2d2h\n", "new   0/1   Pending   0     0s\n")
}

func TestGlobalFlags(t *testing.T) {
	for _, args := range [][]string{{"-v", "2", "get", "ns"}, {"--v=3", "get", "ns"}, {"get", "ns", "--kubeconfig", "/nonexistent"}} {
		res := run(t, newFake(), "", args...)
		if res.code != 0 {
			t.Errorf("%v: %+v", args, res)
		}
	}
}
