package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// kubectlTable is the Accept header kubectl 1.32's get sends.
const kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func TestTableNegotiation(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", pod("web", map[string]string{"app": "web"}))
	tests := []struct {
		name, path, accept string
		code               int
		kind, apiVersion   string // of the answer
		rowObject          string // kind of rows[0].object ("null": none)
		reason             api.StatusReason
	}{
		{"no Accept: plain list", "/api/v1/namespaces/default/pods", "", 200, "PodList", "v1", "", ""},
		{"plain JSON", "/api/v1/namespaces/default/pods", "application/json", 200, "PodList", "v1", "", ""},
		{"anything", "/api/v1/namespaces/default/pods", "*/*", 200, "PodList", "v1", "", ""},
		{"kubectl get", "/api/v1/namespaces/default/pods", kubectlTable, 200, "Table", "meta.k8s.io/v1", "PartialObjectMetadata", ""},
		{"v1beta1", "/api/v1/namespaces/default/pods", "application/json;as=Table;v=v1beta1;g=meta.k8s.io", 200, "Table", "meta.k8s.io/v1beta1", "PartialObjectMetadata", ""},
		{"parameters in another order", "/api/v1/namespaces/default/pods", "application/json;g=meta.k8s.io;v=v1;as=Table", 200, "Table", "meta.k8s.io/v1", "PartialObjectMetadata", ""},
		{"includeObject=Object", "/api/v1/namespaces/default/pods?includeObject=Object", kubectlTable, 200, "Table", "meta.k8s.io/v1", "Pod", ""},
		{"includeObject=None", "/api/v1/namespaces/default/pods?includeObject=None", kubectlTable, 200, "Table", "meta.k8s.io/v1", "null", ""},
		{"includeObject=Metadata", "/api/v1/namespaces/default/pods?includeObject=Metadata", kubectlTable, 200, "Table", "meta.k8s.io/v1", "PartialObjectMetadata", ""},
		{"get one object", "/api/v1/namespaces/default/pods/web", kubectlTable, 200, "Table", "meta.k8s.io/v1", "PartialObjectMetadata", ""},
		{"get one object, plain", "/api/v1/namespaces/default/pods/web", "application/json", 200, "Pod", "v1", "", ""},
		{"unknown as= falls back to the next clause", "/api/v1/namespaces/default/pods", "application/json;as=Foo;v=v1;g=meta.k8s.io, application/json", 200, "PodList", "v1", "", ""},
		{"unknown as= alone", "/api/v1/namespaces/default/pods", "application/json;as=Foo;v=v1;g=meta.k8s.io", 406, "Status", "v1", "", "NotAcceptable"},
		{"a Table version that does not exist", "/api/v1/namespaces/default/pods/web", "application/json;as=Table;v=v1alpha1;g=meta.k8s.io", 406, "Status", "v1", "", "NotAcceptable"},
		{"a Table of another group", "/api/v1/namespaces/default/pods", "application/json;as=Table;v=v1;g=apps", 406, "Status", "v1", "", "NotAcceptable"},
		{"bad includeObject", "/api/v1/namespaces/default/pods?includeObject=All", kubectlTable, 400, "Status", "v1", "", api.ReasonBadRequest},
		{"not found stays a Status", "/api/v1/namespaces/default/pods/nope", kubectlTable, 404, "Status", "v1", "", api.ReasonNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var header []string
			if tc.accept != "" {
				header = []string{"Accept", tc.accept}
			}
			code, b := e.do("GET", tc.path, nil, header...)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, b)
			}
			var tm api.TypeMeta
			if err := json.Unmarshal(b, &tm); err != nil {
				t.Fatal(err)
			}
			if tm.Kind != tc.kind || tm.APIVersion != tc.apiVersion {
				t.Fatalf("answer %s %s, want %s %s: %s", tm.APIVersion, tm.Kind, tc.apiVersion, tc.kind, b)
			}
			if tc.reason != "" {
				st := status(t, b, tc.code, tc.reason)
				if tc.reason == "NotAcceptable" && st.Message != "only the following media types are accepted: application/json" {
					t.Errorf("message %q", st.Message)
				}
				if tc.reason == api.ReasonBadRequest && !strings.HasPrefix(st.Message, `Unable to convert to Table as requested: includeObject: Invalid value: "All"`) {
					t.Errorf("message %q", st.Message)
				}
				return
			}
			if tc.kind != "Table" {
				return
			}
			tb := decode[metav1.Table](t, b)
			if got := headerNames(tb.ColumnDefinitions); !reflect.DeepEqual(got, []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}) {
				t.Errorf("columns %q", got)
			}
			for _, c := range tb.ColumnDefinitions {
				if c.Type == "" || c.Description == "" {
					t.Errorf("column %+v lacks a type or description", c)
				}
				if (c.Priority == 1) != (c.Name == "IP" || c.Name == "Node" || c.Name == "Nominated Node" || c.Name == "Readiness Gates") {
					t.Errorf("column %s has priority %d", c.Name, c.Priority)
				}
			}
			if tb.ResourceVersion == "" {
				t.Error("no resourceVersion")
			}
			if len(tb.Rows) != 1 {
				t.Fatalf("%d rows", len(tb.Rows))
			}
			row := tb.Rows[0]
			if len(row.Cells) != len(tb.ColumnDefinitions) || row.Cells[0] != "web" || row.Cells[2] != "Pending" || row.Cells[5] != "<none>" {
				t.Errorf("cells %v", row.Cells)
			}
			switch {
			case tc.rowObject == "null":
				if string(row.Object.Raw) != "null" && row.Object.Raw != nil {
					t.Errorf("row object %s, want none", row.Object.Raw)
				}
			default:
				var obj struct {
					api.TypeMeta `json:",inline"`
					Metadata     api.ObjectMeta  `json:"metadata"`
					Spec         json.RawMessage `json:"spec"`
				}
				if err := json.Unmarshal(row.Object.Raw, &obj); err != nil {
					t.Fatal(err)
				}
				wantAPI := tc.apiVersion
				if tc.rowObject == "Pod" {
					wantAPI = "v1"
				}
				if obj.Kind != tc.rowObject || obj.APIVersion != wantAPI || obj.Metadata.Name != "web" || obj.Metadata.Labels["app"] != "web" {
					t.Errorf("row object %s", row.Object.Raw)
				}
				if (obj.Spec != nil) != (tc.rowObject == "Pod") {
					t.Errorf("row object of kind %s with spec %s", obj.Kind, obj.Spec)
				}
			}
		})
	}
}

func headerNames(cols []metav1.TableColumnDefinition) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name)
	}
	return out
}

// A watch as Table: each event a Table of one row; only the first event
// carries the column definitions; an ERROR stays a Status.
func TestTableWatch(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/configmaps", configMap("default", "a"))
	w := e.watch("/api/v1/namespaces/default/configmaps?watch=1", "Accept", kubectlTable)
	first := tableEvent(t, w.next())
	e.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/configmaps", configMap("default", "b"))
	second := tableEvent(t, w.next())
	e.must(http.StatusOK, "DELETE", "/api/v1/namespaces/default/configmaps/a", nil)
	third := tableEvent(t, w.next())
	for i, tc := range []struct {
		tb      *metav1.Table
		name    string
		headers bool
	}{{first, "a", true}, {second, "b", false}, {third, "a", false}} {
		if got := len(tc.tb.ColumnDefinitions) > 0; got != tc.headers {
			t.Errorf("event %d: column definitions %v, want %v", i, tc.tb.ColumnDefinitions, tc.headers)
		}
		if tc.tb.APIVersion != "meta.k8s.io/v1" || tc.tb.Kind != "Table" || len(tc.tb.Rows) != 1 {
			t.Fatalf("event %d: %+v", i, tc.tb)
		}
		if cells := tc.tb.Rows[0].Cells; len(cells) != 3 || cells[0] != tc.name || cells[1] != float64(1) {
			t.Errorf("event %d: cells %v", i, cells)
		}
	}
	if want := headerNames(first.ColumnDefinitions); !reflect.DeepEqual(want, []string{"Name", "Data", "Age"}) {
		t.Errorf("columns %q", want)
	}

	// A resourceVersion the store does not reach: the ERROR event keeps its Status.
	e.reg.freshWait = 10 * time.Millisecond
	w = e.watch("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=999999", "Accept", kubectlTable)
	ev := w.next()
	if ev.Type != api.Error {
		t.Fatalf("event %s %s", ev.Type, ev.Object)
	}
	status(t, ev.Object, http.StatusGatewayTimeout, api.ReasonTimeout)
}

func tableEvent(t *testing.T, ev api.WatchEvent) *metav1.Table {
	t.Helper()
	if ev.Type == api.Error {
		t.Fatalf("error event %s", ev.Object)
	}
	return decode[metav1.Table](t, ev.Object)
}

// The real kubectl against the handler: `kubectl get` shows Kubernetes'
// headers and skiff's cells.

// labObjects creates, through the registry, what the kubectl tests list:
// namespace lab with a running pod (restarted twice), a pending pod, a
// deployment, its replica set, a NodePort service, a config map, an event;
// and node-1.
func labObjects(t *testing.T, e *env) (svcIP string) {
	t.Helper()
	ctx := context.Background()
	create := func(o api.Object) api.Object {
		t.Helper()
		k := api.MustKindOf(o)
		out, err := e.reg.Create(ctx, k, o)
		if err != nil {
			t.Fatalf("create %s: %v", k.Kind, err)
		}
		return out
	}
	status := func(o api.Object) {
		t.Helper()
		if _, err := e.reg.UpdateStatus(ctx, api.MustKindOf(o), o); err != nil {
			t.Fatalf("status of %s: %v", o.GetObjectMeta().Name, err)
		}
	}
	now := time.Now()
	create(&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab"}})

	n := create(&api.Node{ObjectMeta: api.ObjectMeta{Name: "node-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}).(*api.Node)
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue, LastHeartbeatTime: api.NewTime(now)}}
	n.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: "10.0.0.11"}}
	n.Status.NodeInfo = api.NodeSystemInfo{KubeletVersion: "v1.32.0-skiff", OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0-18-amd64", ContainerRuntimeVersion: "containerd://1.7.24"}
	status(n)

	web := pod("web-1", map[string]string{"app": "web"})
	web.Namespace, web.Spec.NodeName = "lab", "node-1"
	web = create(web).(*api.Pod)
	web.Status = api.PodStatus{Phase: api.PodRunning, PodIP: "10.244.1.5", PodIPs: []api.PodIP{{IP: "10.244.1.5"}},
		Conditions: []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}},
		ContainerStatuses: []api.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2, State: api.ContainerState{Running: &api.ContainerStateRunning{}},
			LastTerminationState: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: 1, FinishedAt: api.NewTime(now.Add(-30 * time.Minute))}}}}}
	status(web)
	pending := pod("queued", nil)
	pending.Namespace = "lab"
	create(pending)

	d := deployment("web", 3)
	d.Namespace = "lab"
	d = create(d).(*api.Deployment)
	d.Status = api.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1}
	status(d)
	rs := &api.ReplicaSet{ObjectMeta: api.ObjectMeta{Name: "web-5d8f", Namespace: "lab", Labels: d.Spec.Template.Labels},
		Spec: api.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template}}
	rs = create(rs).(*api.ReplicaSet)
	rs.Status = api.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}
	status(rs)

	svc := create(&api.Service{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "lab"}, Spec: api.ServiceSpec{Type: "NodePort",
		Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Port: 80, NodePort: 30080}}}}).(*api.Service)
	create(&api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "page", Namespace: "lab"}, Data: map[string]string{"index.html": "hi", "x": "y"}})
	create(&api.Event{ObjectMeta: api.ObjectMeta{Name: "web-1.1", Namespace: "lab"}, Type: "Warning", Reason: "BackOff",
		Message: "Back-off restarting failed container c", InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: "lab", Name: "web-1", FieldPath: "spec.containers{c}"},
		Source: api.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: api.NewTime(now.Add(-20 * time.Minute)), LastTimestamp: api.NewTime(now.Add(-15 * time.Minute)), Count: 4})
	never := api.PreemptNever
	create(&api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "batch-low"}, Value: 100, PreemptionPolicy: &never, Description: "batch jobs"})
	return svc.Spec.ClusterIP
}

// parseTables reads kubectl's output: tables separated by blank lines,
// each cell cut at its header's column (kubectl pads every column).
func parseTables(t *testing.T, out string) [][]map[string]string {
	t.Helper()
	var tables [][]map[string]string
	for _, block := range strings.Split(strings.TrimRight(out, "\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		heads := regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(lines[0], -1)
		var rows []map[string]string
		for _, l := range lines[1:] {
			row := map[string]string{}
			for i, h := range heads {
				end := len(l)
				if i+1 < len(heads) {
					end = min(heads[i+1][0], len(l))
				}
				if h[0] < len(l) {
					row[lines[0][h[0]:h[1]]] = strings.TrimSpace(l[h[0]:end])
				}
			}
			rows = append(rows, row)
		}
		tables = append(tables, rows)
	}
	return tables
}

func headersOf(out string) [][]string {
	var hs [][]string
	for _, block := range strings.Split(strings.TrimRight(out, "\n"), "\n\n") {
		first, _, _ := strings.Cut(block, "\n")
		hs = append(hs, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(first), -1))
	}
	return hs
}

var seconds = regexp.MustCompile(`^\d+s$`)

func TestKubectlGetShowsKubernetesColumns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clusterIP := labObjects(t, e)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	h := func(s string) []string { return strings.Split(s, "|") }
	tests := []struct {
		name    string
		args    []string
		headers [][]string
		// rows: per table, the cells to check of the row whose NAME (or,
		// without NAME, first cell) is the key; "AGE": a few seconds.
		rows []map[string]map[string]string
	}{
		{"pods", []string{"get", "pods", "-n", "lab"},
			[][]string{h("NAME|READY|STATUS|RESTARTS|AGE")},
			[]map[string]map[string]string{{
				"web-1":  {"READY": "1/1", "STATUS": "Running", "RESTARTS": "2 (30m ago)", "AGE": "AGE"},
				"queued": {"READY": "0/1", "STATUS": "Pending", "RESTARTS": "0", "AGE": "AGE"},
			}}},
		{"pods wide", []string{"get", "pods", "-n", "lab", "-o", "wide"},
			[][]string{h("NAME|READY|STATUS|RESTARTS|AGE|IP|NODE|NOMINATED NODE|READINESS GATES")},
			[]map[string]map[string]string{{
				"web-1":  {"IP": "10.244.1.5", "NODE": "node-1", "NOMINATED NODE": "<none>", "READINESS GATES": "<none>"},
				"queued": {"IP": "<none>", "NODE": "<none>"},
			}}},
		{"pods across namespaces, with labels", []string{"get", "pods", "-A", "--show-labels"},
			[][]string{h("NAMESPACE|NAME|READY|STATUS|RESTARTS|AGE|LABELS")},
			[]map[string]map[string]string{{"web-1": {"NAMESPACE": "lab", "LABELS": "app=web"}}}},
		{"several kinds", []string{"get", "deploy,rs,svc,cm", "-n", "lab"},
			[][]string{h("NAME|READY|UP-TO-DATE|AVAILABLE|AGE"), h("NAME|DESIRED|CURRENT|READY|AGE"), h("NAME|TYPE|CLUSTER-IP|EXTERNAL-IP|PORT(S)|AGE"), h("NAME|DATA|AGE")},
			[]map[string]map[string]string{
				{"deployment.apps/web": {"READY": "1/3", "UP-TO-DATE": "3", "AVAILABLE": "1", "AGE": "AGE"}},
				{"replicaset.apps/web-5d8f": {"DESIRED": "3", "CURRENT": "3", "READY": "1"}},
				{"service/web": {"TYPE": "NodePort", "CLUSTER-IP": clusterIP, "EXTERNAL-IP": "<none>", "PORT(S)": "80:30080/TCP"}},
				{"configmap/page": {"DATA": "2"}},
			}},
		{"deployments wide", []string{"get", "deployments", "-n", "lab", "-o", "wide"},
			[][]string{h("NAME|READY|UP-TO-DATE|AVAILABLE|AGE|CONTAINERS|IMAGES|SELECTOR")},
			[]map[string]map[string]string{{"web": {"CONTAINERS": "c", "IMAGES": "nginx:1.27", "SELECTOR": "app=web"}}}},
		{"nodes wide", []string{"get", "nodes", "-o", "wide"},
			[][]string{h("NAME|STATUS|ROLES|AGE|VERSION|INTERNAL-IP|EXTERNAL-IP|OS-IMAGE|KERNEL-VERSION|CONTAINER-RUNTIME|GPUS|GPU-PRODUCT")},
			[]map[string]map[string]string{{"node-1": {"STATUS": "Ready", "ROLES": "control-plane", "VERSION": "v1.32.0-skiff", "INTERNAL-IP": "10.0.0.11",
				"EXTERNAL-IP": "<none>", "OS-IMAGE": "Debian GNU/Linux 12 (bookworm)", "KERNEL-VERSION": "6.1.0-18-amd64", "CONTAINER-RUNTIME": "containerd://1.7.24", "GPUS": "0"}}}},
		{"events", []string{"get", "events", "-n", "lab"},
			[][]string{h("LAST SEEN|TYPE|REASON|OBJECT|MESSAGE")},
			[]map[string]map[string]string{{"15m": {"TYPE": "Warning", "REASON": "BackOff", "OBJECT": "pod/web-1", "MESSAGE": "Back-off restarting failed container c"}}}},
		{"events wide", []string{"get", "events", "-n", "lab", "-o", "wide"},
			[][]string{h("LAST SEEN|TYPE|REASON|OBJECT|SUBOBJECT|SOURCE|MESSAGE|FIRST SEEN|COUNT|NAME")},
			[]map[string]map[string]string{{"web-1.1": {"LAST SEEN": "15m", "SUBOBJECT": "spec.containers{c}", "SOURCE": "kubelet, node-1", "FIRST SEEN": "20m", "COUNT": "4"}}}},
		{"get all", []string{"get", "all", "-n", "lab"},
			[][]string{h("NAME|READY|STATUS|RESTARTS|AGE"), h("NAME|TYPE|CLUSTER-IP|EXTERNAL-IP|PORT(S)|AGE"), h("NAME|READY|UP-TO-DATE|AVAILABLE|AGE"), h("NAME|DESIRED|CURRENT|READY|AGE")},
			[]map[string]map[string]string{
				{"pod/web-1": {"STATUS": "Running"}, "pod/queued": {"STATUS": "Pending"}},
				{"service/web": {"TYPE": "NodePort"}},
				{"deployment.apps/web": {"READY": "1/3"}},
				{"replicaset.apps/web-5d8f": {"DESIRED": "3"}},
			}},
		{"one object", []string{"get", "pod", "web-1", "-n", "lab"},
			[][]string{h("NAME|READY|STATUS|RESTARTS|AGE")},
			[]map[string]map[string]string{{"web-1": {"STATUS": "Running"}}}},
		{"priority classes (PREEMPTIONPOLICY is not a wide column)", []string{"get", "priorityclasses"},
			[][]string{h("NAME|VALUE|GLOBAL-DEFAULT|AGE|PREEMPTIONPOLICY")},
			[]map[string]map[string]string{{"batch-low": {"VALUE": "100", "GLOBAL-DEFAULT": "false", "PREEMPTIONPOLICY": "Never", "AGE": "AGE"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := c.Must(t, "", tc.args...)
			if got := headersOf(out); !reflect.DeepEqual(got, tc.headers) {
				t.Fatalf("headers\n%q\nwant\n%q\noutput:\n%s", got, tc.headers, out)
			}
			tables := parseTables(t, out)
			for i, want := range tc.rows {
				for key, cells := range want {
					keyCol := tc.headers[i][0]
					if slices.Contains(tc.headers[i], "NAME") {
						keyCol = "NAME"
					}
					var row map[string]string
					for _, r := range tables[i] {
						if r[keyCol] == key {
							row = r
						}
					}
					if row == nil {
						t.Fatalf("table %d has no row %q:\n%s", i, key, out)
					}
					for col, v := range cells {
						switch {
						case v == "AGE":
							if !seconds.MatchString(row[col]) {
								t.Errorf("row %s: %s = %q, want seconds", key, col, row[col])
							}
						case row[col] != v:
							t.Errorf("row %s: %s = %q, want %q\n%s", key, col, row[col], v, out)
						}
					}
				}
			}
		})
	}
}

// kubectl get pods -w: the list, then each change as a row, without a
// second header.
func TestKubectlGetWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	labObjects(t, e)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectltest.Binary(t), "--kubeconfig", c.Kubeconfig, "--cache-dir", filepath.Join(t.TempDir(), "cache"), "get", "pods", "-n", "lab", "-w")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out syncBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { cancel(); <-done }()
	testwait.For(t, 30*time.Second, "the listed pods", func() bool { return strings.Contains(out.String(), "queued") })
	p := pod("late", nil)
	p.Namespace = "lab"
	if _, err := e.reg.Create(context.Background(), podKind, p); err != nil {
		t.Fatal(err)
	}
	// The whole row: kubectl may write a row's cells in more than one write.
	lateRow := regexp.MustCompile(`(?m)^late\s.*\n`)
	testwait.For(t, 30*time.Second, "the new pod's row", func() bool { return lateRow.MatchString(out.String()) })
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := regexp.MustCompile(`\s{2,}`).Split(lines[0], -1); !reflect.DeepEqual(got, []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}) {
		t.Fatalf("header %q:\n%s", got, out.String())
	}
	if n := strings.Count(out.String(), "RESTARTS"); n != 1 {
		t.Errorf("%d headers:\n%s", n, out.String())
	}
	last := regexp.MustCompile(`\s+`).Split(lines[len(lines)-1], -1)
	if len(last) != 5 || last[0] != "late" || last[1] != "0/1" || last[2] != "Pending" || last[3] != "0" || !seconds.MatchString(last[4]) {
		t.Errorf("watched row %q:\n%s", last, out.String())
	}
}

// syncBuf is a bytes.Buffer safe for one writer and a poller.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
