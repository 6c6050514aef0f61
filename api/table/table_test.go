package table

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) api.Time { return api.NewTime(now.Add(-d)) }

func meta(ns, name string, age time.Duration) api.ObjectMeta {
	return api.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: ago(age)}
}

// row renders obj's cells as kubectl shows them (wide: every column).
func row(p Printer, obj api.Object, wide bool) []string {
	cells := p.Cells(obj, now)
	var out []string
	for i, c := range p.Columns {
		if Shown(c, wide) {
			out = append(out, FormatCell(cells[i]))
		}
	}
	return out
}

func TestColumnsOfEveryKind(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	never := "Never"
	running := api.ContainerState{Running: &api.ContainerStateRunning{}}
	node := &api.Node{ObjectMeta: meta("", "node-1", 48*time.Hour)}
	node.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", api.LabelGPUProduct: "NVIDIA-H100"}
	node.Spec.Unschedulable = true
	node.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	node.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}}
	node.Status.NodeInfo = api.NodeSystemInfo{KubeletVersion: "v1.32.0-skiff", OSImage: "Debian 12", KernelVersion: "6.1.0", ContainerRuntimeVersion: "containerd://1.7"}
	node.Status.Allocatable = api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse("8")}
	labels := map[string]string{"app": "web"}
	tmpl := api.PodTemplateSpec{Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:alpine"}, {Name: "log", Image: "busybox"}}}}

	tests := []struct {
		kind        string
		obj         api.Object
		headers     []string // without -o wide
		wideHeaders []string // with -o wide
		cells       []string // with -o wide
	}{
		{"namespaces", &api.Namespace{ObjectMeta: meta("", "gpu-demo", time.Hour), Status: api.NamespaceStatus{Phase: "Active"}},
			[]string{"NAME", "STATUS", "AGE"}, nil, []string{"gpu-demo", "Active", "60m"}},
		{"configmaps", &api.ConfigMap{ObjectMeta: meta("a", "page", 3*time.Minute), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": nil}},
			[]string{"NAME", "DATA", "AGE"}, nil, []string{"page", "3", "3m"}},
		{"secrets", &api.Secret{ObjectMeta: meta("a", "tls", 5*time.Second), Type: "kubernetes.io/tls", Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}},
			[]string{"NAME", "TYPE", "DATA", "AGE"}, nil, []string{"tls", "kubernetes.io/tls", "2", "5s"}},
		{"pods", &api.Pod{ObjectMeta: meta("a", "web-1", 50*time.Hour),
			Spec:   api.PodSpec{NodeName: "node-1", Containers: []api.Container{{Name: "web"}}},
			Status: api.PodStatus{Phase: api.PodRunning, PodIPs: []api.PodIP{{IP: "10.244.0.6"}}, ContainerStatuses: []api.ContainerStatus{{Ready: true, State: running}}}},
			[]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
			[]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"},
			[]string{"web-1", "1/1", "Running", "0", "2d2h", "10.244.0.6", "node-1", "<none>", "<none>"}},
		{"services", &api.Service{ObjectMeta: meta("a", "web", 3*time.Minute), Spec: api.ServiceSpec{Type: "NodePort", ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Selector: labels, Ports: []api.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}}},
			[]string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"},
			[]string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"},
			[]string{"web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "3m", "app=web"}},
		{"headless service without ports", &api.Service{ObjectMeta: meta("a", "db", time.Minute), Spec: api.ServiceSpec{ClusterIP: "None"}},
			nil, nil, []string{"db", "ClusterIP", "None", "<none>", "<none>", "60s", "<none>"}},
		{"endpoints", &api.Endpoints{ObjectMeta: meta("a", "web", time.Minute), Subsets: []api.EndpointSubset{{
			Addresses: []api.EndpointAddress{{IP: "10.244.0.5"}, {IP: "10.244.1.5"}, {IP: "10.244.2.5"}, {IP: "10.244.3.5"}},
			Ports:     []api.EndpointPort{{Port: 80}}}}},
			[]string{"NAME", "ENDPOINTS", "AGE"}, nil, []string{"web", "10.244.0.5:80,10.244.1.5:80,10.244.2.5:80 + 1 more...", "60s"}},
		{"endpoints without subsets", &api.Endpoints{ObjectMeta: meta("a", "web", time.Minute)}, nil, nil, []string{"web", "<none>", "60s"}},
		{"nodes", node,
			[]string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"},
			[]string{"NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME", "GPUS", "GPU-PRODUCT"},
			[]string{"node-1", "Ready,SchedulingDisabled", "control-plane", "2d", "v1.32.0-skiff", "10.0.0.1", "<none>", "Debian 12", "6.1.0", "containerd://1.7", "8", "NVIDIA-H100"}},
		{"node without anything", &api.Node{ObjectMeta: meta("", "bare", time.Second)}, nil, nil,
			[]string{"bare", "Unknown", "<none>", "1s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>", "0", "<none>"}},
		{"events", &api.Event{ObjectMeta: meta("a", "web.1", time.Hour), Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container\n",
			InvolvedObject: api.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{web}"},
			Source:         api.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(time.Minute), Count: 7},
			[]string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"},
			[]string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"},
			[]string{"60s", "Warning", "BackOff", "pod/web", "spec.containers{web}", "kubelet, node-1", "Back-off restarting failed container", "10m", "7", "web.1"}},
		{"event of the new API", &api.Event{ObjectMeta: meta("a", "s.1", time.Hour), Type: "Normal", Reason: "Scheduled", Message: "placed",
			InvolvedObject: api.ObjectReference{Kind: "Pod", Name: "s"}, EventTime: api.MicroTime{Time: now.Add(-2 * time.Minute)},
			ReportingController: "default-scheduler", ReportingInstance: "server-1"},
			nil, nil, []string{"2m", "Normal", "Scheduled", "pod/s", "", "default-scheduler, server-1", "placed", "2m", "1", "s.1"}},
		{"deployments", &api.Deployment{ObjectMeta: meta("a", "web", 3*time.Minute),
			Spec:   api.DeploymentSpec{Replicas: i32(3), Selector: &api.LabelSelector{MatchLabels: labels}, Template: tmpl},
			Status: api.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
			[]string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"},
			[]string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"},
			[]string{"web", "2/3", "3", "2", "3m", "web,log", "nginx:alpine,busybox", "app=web"}},
		{"replicasets", &api.ReplicaSet{ObjectMeta: meta("a", "web-5d8f", 3*time.Minute),
			Spec:   api.ReplicaSetSpec{Selector: &api.LabelSelector{MatchLabels: labels}, Template: tmpl},
			Status: api.ReplicaSetStatus{Replicas: 1}},
			[]string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"},
			[]string{"NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"},
			[]string{"web-5d8f", "1", "1", "0", "3m", "web,log", "nginx:alpine,busybox", "app=web"}},
		{"priorityclasses", &api.PriorityClass{ObjectMeta: meta("", "batch", time.Hour), Value: 1000, GlobalDefault: true, PreemptionPolicy: &never},
			[]string{"NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"}, nil, []string{"batch", "1000", "true", "60m", "Never"}},
		{"a kind without columns: NAME AGE", &api.PodTrace{ObjectMeta: meta("a", "web", time.Minute)},
			[]string{"NAME", "AGE"}, nil, []string{"web", "60s"}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			k, err := api.KindOf(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			p := For(k)
			if tc.headers != nil {
				if got := Headers(p.Columns, false); !reflect.DeepEqual(got, tc.headers) {
					t.Errorf("headers = %q, want %q", got, tc.headers)
				}
				want := tc.wideHeaders
				if want == nil {
					want = tc.headers // no -o wide columns
				}
				if got := Headers(p.Columns, true); !reflect.DeepEqual(got, want) {
					t.Errorf("wide headers = %q, want %q", got, want)
				}
			}
			cells := p.Cells(tc.obj, now)
			if len(cells) != len(p.Columns) {
				t.Fatalf("%d cells for %d columns", len(cells), len(p.Columns))
			}
			if got := row(p, tc.obj, true); !reflect.DeepEqual(got, tc.cells) {
				t.Errorf("cells =\n%q\nwant\n%q", got, tc.cells)
			}
			for i, c := range p.Columns {
				if c.Description == "" {
					t.Errorf("column %s has no description", c.Name)
				}
				switch cells[i].(type) {
				case string:
				case int64:
					if c.Type != "integer" && c.Type != "string" {
						t.Errorf("column %s of type %s holds an int64", c.Name, c.Type)
					}
				case bool:
					if c.Type != "boolean" {
						t.Errorf("column %s of type %s holds a bool", c.Name, c.Type)
					}
				default:
					t.Errorf("column %s: cell of type %T", c.Name, cells[i])
				}
			}
		})
	}
}

// Every served kind has a printer whose first NAME column is the name
// (the one the kind prefix of `get a,b` goes on), and whose cells match
// its columns for an empty object.
func TestEveryKindHasAPrinter(t *testing.T) {
	for _, k := range api.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			p := For(k)
			o := k.New()
			o.GetObjectMeta().Name = "x"
			cells := p.Cells(o, now)
			if len(cells) != len(p.Columns) {
				t.Fatalf("%d cells for %d columns", len(cells), len(p.Columns))
			}
			names := 0
			for i, c := range p.Columns {
				if c.Format == "name" {
					names++
					if cells[i] != "x" {
						t.Errorf("name column %s holds %v", c.Name, cells[i])
					}
				}
			}
			if names != 1 {
				t.Errorf("%d name columns, want 1", names)
			}
		})
	}
}

func TestPodStatus(t *testing.T) {
	deleting := ago(time.Second)
	waiting := func(reason string) api.ContainerState {
		return api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: reason}}
	}
	term := func(reason string, code int32) api.ContainerState {
		return api.ContainerState{Terminated: &api.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	running := api.ContainerState{Running: &api.ContainerStateRunning{}}
	restarted := func(n int32, finished time.Duration) api.ContainerStatus {
		return api.ContainerStatus{State: waiting("CrashLoopBackOff"), RestartCount: n,
			LastTerminationState: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(finished)}}}
	}
	tests := []struct {
		name                    string
		pod                     api.Pod
		ready, status, restarts string
	}{
		{"pending, unscheduled", api.Pod{Status: api.PodStatus{Phase: "Pending"}}, "0/1", "Pending", "0"},
		{"no phase yet", api.Pod{}, "0/1", "Pending", "0"},
		{"scheduling gated", api.Pod{Status: api.PodStatus{Phase: "Pending", Conditions: []api.PodCondition{{Type: api.PodScheduled, Reason: "SchedulingGated"}}}}, "0/1", "SchedulingGated", "0"},
		{"container creating", api.Pod{Status: api.PodStatus{Phase: "Pending", ContainerStatuses: []api.ContainerStatus{{State: waiting("ContainerCreating")}}}}, "0/1", "ContainerCreating", "0"},
		{"running ready", api.Pod{Status: api.PodStatus{Phase: "Running", ContainerStatuses: []api.ContainerStatus{{Ready: true, State: running}}}}, "1/1", "Running", "0"},
		{"crash loop: restarts and when", api.Pod{Status: api.PodStatus{Phase: "Running", ContainerStatuses: []api.ContainerStatus{restarted(5, 5*time.Minute)}}}, "0/1", "CrashLoopBackOff", "5 (5m ago)"},
		{"restarts summed, latest counts", api.Pod{Spec: api.PodSpec{Containers: []api.Container{{Name: "a"}, {Name: "b"}}},
			Status: api.PodStatus{Phase: "Running", ContainerStatuses: []api.ContainerStatus{restarted(2, time.Hour), restarted(1, 90*time.Second)}}}, "0/2", "CrashLoopBackOff", "3 (90s ago)"},
		{"restarts without a termination time", api.Pod{Status: api.PodStatus{Phase: "Running", ContainerStatuses: []api.ContainerStatus{{Ready: true, State: running, RestartCount: 2}}}}, "1/1", "Running", "2"},
		{"image pull", api.Pod{Status: api.PodStatus{Phase: "Pending", ContainerStatuses: []api.ContainerStatus{{State: waiting("ErrImagePull")}}}}, "0/1", "ErrImagePull", "0"},
		{"completed", api.Pod{Status: api.PodStatus{Phase: "Succeeded", ContainerStatuses: []api.ContainerStatus{{State: term("Completed", 0)}}}}, "0/1", "Completed", "0"},
		{"oom killed", api.Pod{Status: api.PodStatus{Phase: "Failed", ContainerStatuses: []api.ContainerStatus{{State: term("OOMKilled", 137)}}}}, "0/1", "OOMKilled", "0"},
		{"exit code without reason", api.Pod{Status: api.PodStatus{Phase: "Failed", ContainerStatuses: []api.ContainerStatus{{State: term("", 3)}}}}, "0/1", "ExitCode:3", "0"},
		{"terminating", api.Pod{ObjectMeta: api.ObjectMeta{DeletionTimestamp: &deleting}, Status: api.PodStatus{Phase: "Running", ContainerStatuses: []api.ContainerStatus{{Ready: true, State: running}}}}, "1/1", "Terminating", "0"},
		{"deleted after completing stays Completed", api.Pod{ObjectMeta: api.ObjectMeta{DeletionTimestamp: &deleting}, Status: api.PodStatus{Phase: "Succeeded", ContainerStatuses: []api.ContainerStatus{{State: term("Completed", 0)}}}}, "0/1", "Completed", "0"},
		{"node lost", api.Pod{ObjectMeta: api.ObjectMeta{DeletionTimestamp: &deleting}, Status: api.PodStatus{Phase: "Running", Reason: "NodeLost"}}, "0/1", "Unknown", "0"},
		{"evicted", api.Pod{Status: api.PodStatus{Phase: "Failed", Reason: "Evicted"}}, "0/1", "Evicted", "0"},
		{"init running", api.Pod{Spec: api.PodSpec{InitContainers: []api.Container{{Name: "i"}}}, Status: api.PodStatus{Phase: "Pending", InitContainerStatuses: []api.ContainerStatus{{State: running}}}}, "0/1", "Init:0/1", "0"},
		{"init crash", api.Pod{Spec: api.PodSpec{InitContainers: []api.Container{{Name: "i"}}}, Status: api.PodStatus{Phase: "Pending", InitContainerStatuses: []api.ContainerStatus{{State: waiting("CrashLoopBackOff")}}}}, "0/1", "Init:CrashLoopBackOff", "0"},
		{"init failed", api.Pod{Spec: api.PodSpec{InitContainers: []api.Container{{Name: "i"}}}, Status: api.PodStatus{Phase: "Pending", InitContainerStatuses: []api.ContainerStatus{{State: term("", 2)}}}}, "0/1", "Init:ExitCode:2", "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod
			if len(p.Spec.Containers) == 0 {
				p.Spec.Containers = []api.Container{{Name: "c"}}
			}
			got := PodStatus(&p, now)
			if got.Ready != tc.ready || got.Status != tc.status || got.Restarts != tc.restarts {
				t.Errorf("got %+v, want ready %s status %s restarts %s", got, tc.ready, tc.status, tc.restarts)
			}
		})
	}
}

func TestFormatCellAndAge(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{{"a\nb", "a..."}, {"plain", "plain"}, {int64(3), "3"}, {false, "false"}, {nil, ""}} {
		if got := FormatCell(tc.in); got != tc.want {
			t.Errorf("FormatCell(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{
		5 * time.Second:                "5s",
		3*time.Minute + 12*time.Second: "3m12s",
		2 * time.Hour:                  "120m",
		5 * time.Hour:                  "5h",
		49 * time.Hour:                 "2d1h",
		9 * 24 * time.Hour:             "9d",
	} {
		if got := Age(now, now.Add(-d)); got != want {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
	if got := Age(now, time.Time{}); got != "<unknown>" {
		t.Errorf("zero age = %q", got)
	}
}
