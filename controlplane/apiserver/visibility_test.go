package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// seedQueues stores a ClusterQueue, LocalQueues user-queue (default) and
// b-queue (team-b) on it, and pending workloads: w-high (priority 100)
// and w-1, w-2 in default and b-1 in team-b (priority 0: ordered by their
// creation, then namespace and name; the tests read that order from the
// cluster queue's answer rather than assume it).
func seedQueues(t *testing.T, e *env) {
	t.Helper()
	ctx := t.Context()
	objs := []api.Object{
		&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team-b"}},
		&api.ResourceFlavor{ObjectMeta: api.ObjectMeta{Name: "default-flavor"}},
		&api.ClusterQueue{ObjectMeta: api.ObjectMeta{Name: "cluster-queue"}, Spec: api.ClusterQueueSpec{NamespaceSelector: &api.LabelSelector{}}},
		&api.LocalQueue{ObjectMeta: api.ObjectMeta{Name: "user-queue", Namespace: "default"}, Spec: api.LocalQueueSpec{ClusterQueue: "cluster-queue"}},
		&api.LocalQueue{ObjectMeta: api.ObjectMeta{Name: "b-queue", Namespace: "team-b"}, Spec: api.LocalQueueSpec{ClusterQueue: "cluster-queue"}},
	}
	wl := func(ns, name, queue string, prio int32) *api.Workload {
		return &api.Workload{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns,
			OwnerReferences: []api.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: strings.TrimPrefix(name, "w-"), UID: "uid-" + name}}},
			Spec: api.WorkloadSpec{QueueName: queue, Priority: &prio, PodSets: []api.PodSet{{Name: "main", Count: 1,
				Template: api.PodTemplateSpec{Spec: api.PodSpec{RestartPolicy: "Never", Containers: []api.Container{{Name: "c", Image: "busybox"}}}}}}}}
	}
	objs = append(objs, wl("default", "w-1", "user-queue", 0), wl("default", "w-2", "user-queue", 0), wl("team-b", "b-1", "b-queue", 0),
		wl("default", "w-high", "user-queue", 100))
	for _, o := range objs {
		if _, err := e.local.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

type pendingSummary struct {
	Kind, APIVersion string
	Items            []struct {
		Metadata struct {
			Name, Namespace string
			OwnerReferences []api.OwnerReference
		}
		Priority               int32
		LocalQueueName         string
		PositionInClusterQueue int32
		PositionInLocalQueue   int32
	}
}

// rows prints a summary's items as "ns/name lq posCQ posLQ prio".
func (s pendingSummary) rows() string {
	var out []string
	for _, it := range s.Items {
		out = append(out, fmt.Sprintf("%s/%s %s %d %d %d", it.Metadata.Namespace, it.Metadata.Name, it.LocalQueueName, it.PositionInClusterQueue, it.PositionInLocalQueue, it.Priority))
	}
	return strings.Join(out, "; ")
}

// The pendingworkloads paths answer Kueue's PendingWorkloadsSummary in the
// cycle's order, paged with limit and offset as Kueue pages.
func TestVisibilityPendingWorkloads(t *testing.T) {
	e := newEnv(t)
	seedQueues(t, e)
	const cq = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
	const lq = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/user-queue/pendingworkloads"
	all := decode[pendingSummary](t, e.must(http.StatusOK, http.MethodGet, cq, nil))
	if all.Kind != "PendingWorkloadsSummary" || all.APIVersion != "visibility.kueue.x-k8s.io/v1beta2" || len(all.Items) != 4 {
		t.Fatalf("summary %+v", all)
	}
	if it := all.Items[0]; it.Metadata.Name != "w-high" || it.PositionInClusterQueue != 0 || it.Priority != 100 || len(it.Metadata.OwnerReferences) != 1 || it.Metadata.OwnerReferences[0].Kind != "Job" {
		t.Errorf("head %+v, want w-high with its owner", it)
	}
	// The positions the rest of the answers must agree with.
	pos := map[string][2]int32{}
	for i, it := range all.Items {
		if it.PositionInClusterQueue != int32(i) {
			t.Errorf("item %d has positionInClusterQueue %d", i, it.PositionInClusterQueue)
		}
		pos[it.Metadata.Namespace+"/"+it.Metadata.Name] = [2]int32{it.PositionInClusterQueue, it.PositionInLocalQueue}
	}
	if pos["team-b/b-1"][1] != 0 || pos["default/w-high"][1] != 0 {
		t.Errorf("positions in the local queues %v", pos)
	}
	tests := []struct {
		name, path string
		want       func(s pendingSummary) bool
	}{
		{"cluster queue, offset and limit", cq + "?offset=1&limit=2", func(s pendingSummary) bool {
			return len(s.Items) == 2 && s.Items[0].PositionInClusterQueue == 1 && s.Items[1].PositionInClusterQueue == 2
		}},
		{"cluster queue, limit 0 is the default", cq + "?limit=0", func(s pendingSummary) bool { return len(s.Items) == 4 }},
		{"cluster queue, offset past the end", cq + "?offset=9", func(s pendingSummary) bool { return s.Items != nil && len(s.Items) == 0 }},
		{"local queue: its own, positions in both", lq, func(s pendingSummary) bool {
			if len(s.Items) != 3 {
				return false
			}
			for i, it := range s.Items {
				p := pos[it.Metadata.Namespace+"/"+it.Metadata.Name]
				if it.Metadata.Namespace != "default" || it.LocalQueueName != "user-queue" || it.PositionInLocalQueue != int32(i) || it.PositionInClusterQueue != p[0] {
					return false
				}
			}
			return true
		}},
		{"local queue, offset", lq + "?offset=1&limit=1", func(s pendingSummary) bool {
			return len(s.Items) == 1 && s.Items[0].PositionInLocalQueue == 1
		}},
		{"v1beta1", strings.Replace(cq, "v1beta2", "v1beta1", 1), func(s pendingSummary) bool {
			return s.APIVersion == "visibility.kueue.x-k8s.io/v1beta1" && len(s.Items) == 4
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *decode[pendingSummary](t, e.must(http.StatusOK, http.MethodGet, tt.path, nil))
			if !tt.want(s) {
				t.Errorf("%s: %s", tt.path, s.rows())
			}
		})
	}
	// An admitted workload leaves the list and the others move up.
	o, err := e.local.Get(t.Context(), workloadKind, "default", "w-high")
	if err != nil {
		t.Fatal(err)
	}
	w := o.(*api.Workload)
	w.Status.Admission = &api.WorkloadAdmission{ClusterQueue: "cluster-queue"}
	w.Status.Conditions = []metav1.Condition{{Type: api.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue cluster-queue", LastTransitionTime: metav1.Now()}}
	if _, err := e.local.UpdateStatus(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	after := decode[pendingSummary](t, e.must(http.StatusOK, http.MethodGet, cq, nil))
	if len(after.Items) != 3 || after.Items[0].Metadata.Name == "w-high" || after.Items[0].PositionInClusterQueue != 0 {
		t.Errorf("after the admission: %s", after.rows())
	}
}

func TestVisibilityErrors(t *testing.T) {
	e := newEnv(t)
	seedQueues(t, e)
	tests := []struct {
		name, method, path string
		code               int
		message            string
	}{
		{"unknown cluster queue", http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/nope/pendingworkloads", http.StatusNotFound,
			`clusterqueue.visibility.kueue.x-k8s.io "nope" not found`},
		{"unknown local queue", http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues/user-queue/pendingworkloads", http.StatusNotFound,
			`localqueue.visibility.kueue.x-k8s.io "user-queue" not found`},
		{"bad limit", http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads?limit=ten", http.StatusBadRequest,
			`limit "ten": must be an integer`},
		{"unknown version", http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/cluster-queue/pendingworkloads", http.StatusNotFound, ""},
		{"not a subresource", http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue", http.StatusNotFound, ""},
		{"write", http.MethodPost, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads", http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := e.do(tt.method, tt.path, nil)
			if code != tt.code {
				t.Fatalf("code %d, want %d: %s", code, tt.code, b)
			}
			if tt.message != "" {
				if st := decode[api.Status](t, b); st.Message != tt.message {
					t.Errorf("message %q, want %q", st.Message, tt.message)
				}
			}
		})
	}
}

// Discovery lists the group and its resources as Kueue's visibility
// server installs them; kueue.x-k8s.io stays ahead of it, so kubectl's
// clusterqueues are Kueue's kind.
func TestVisibilityDiscovery(t *testing.T) {
	e := newEnv(t)
	var groups struct{ Groups []apiGroup }
	json.Unmarshal(e.must(http.StatusOK, http.MethodGet, "/apis", nil), &groups)
	kueueAt, visAt := -1, -1
	for i, g := range groups.Groups {
		switch g.Name {
		case "kueue.x-k8s.io":
			kueueAt = i
		case "visibility.kueue.x-k8s.io":
			visAt = i
			if g.PreferredVersion.Version != "v1beta2" || len(g.Versions) != 2 {
				t.Errorf("visibility group %+v", g)
			}
		}
	}
	if kueueAt < 0 || visAt < kueueAt {
		t.Errorf("groups: kueue.x-k8s.io at %d, visibility at %d", kueueAt, visAt)
	}
	var rl struct {
		GroupVersion string
		Resources    []apiResource
	}
	json.Unmarshal(e.must(http.StatusOK, http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2", nil), &rl)
	var names []string
	for _, r := range rl.Resources {
		names = append(names, fmt.Sprintf("%s:%v:%s", r.Name, r.Namespaced, strings.Join(r.Verbs, ",")))
	}
	if got := strings.Join(names, " "); rl.GroupVersion != "visibility.kueue.x-k8s.io/v1beta2" ||
		got != "clusterqueues:false: clusterqueues/pendingworkloads:false:get localqueues:true: localqueues/pendingworkloads:true:get" {
		t.Errorf("resources %s %q", rl.GroupVersion, got)
	}
}

// Who may read what: a service account bound to Kueue's batch user role
// in its namespace its LocalQueues' pending workloads there, not
// elsewhere; the 403 names the subresource.
func TestVisibilityAuthorization(t *testing.T) {
	e := newEnv(t)
	sa := User{Name: "system:serviceaccount:default:default", Groups: []string{ServiceAccountsGroup, ServiceAccountsGroup + ":default", AuthenticatedGroup}}
	bindRole(t, e, "default", "batch-user", "ClusterRole", "kueue-batch-user-role", api.Subject{Kind: api.SubjectServiceAccount, Name: "default"})
	waitAllowed(t, e, res(sa, "get", "kueue.x-k8s.io", "workloads", "", "default", ""))
	const prefix = "/apis/visibility.kueue.x-k8s.io/v1beta2"
	tests := []struct {
		path    string
		allowed bool
		msg     string
	}{
		{prefix + "/namespaces/default/localqueues/user-queue/pendingworkloads", true, ""},
		{prefix + "/namespaces/team-b/localqueues/b-queue/pendingworkloads", false,
			`localqueues.visibility.kueue.x-k8s.io "b-queue" is forbidden: User "system:serviceaccount:default:default" cannot get resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in the namespace "team-b"`},
		{prefix + "/clusterqueues/cluster-queue/pendingworkloads", false,
			`clusterqueues.visibility.kueue.x-k8s.io "cluster-queue" is forbidden: User "system:serviceaccount:default:default" cannot get resource "clusterqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" at the cluster scope`},
		{prefix, true, ""}, // discovery
	}
	for _, tt := range tests {
		a := requestAttributes(httptest.NewRequest(http.MethodGet, tt.path, nil), sa)
		allowed, reason, err := e.srv.authorize(t.Context(), a)
		if err != nil || allowed != tt.allowed {
			t.Errorf("%s: allowed %v (%v), want %v", tt.path, allowed, err, tt.allowed)
			continue
		}
		if !allowed {
			if got := forbiddenError(a, reason).Status.Message; got != tt.msg {
				t.Errorf("%s: 403 %q\nwant %q", tt.path, got, tt.msg)
			}
		}
	}
}

// The Table of workloads carries the positions (kubectl get workloads -o
// wide), computed at the request.
func TestWorkloadTablePositions(t *testing.T) {
	e := newEnv(t)
	seedQueues(t, e)
	all := decode[pendingSummary](t, e.must(http.StatusOK, http.MethodGet, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads", nil))
	want := map[string]string{}
	for _, it := range all.Items {
		want[it.Metadata.Name] = fmt.Sprintf("%d %d", it.PositionInClusterQueue, it.PositionInLocalQueue)
	}
	b := e.must(http.StatusOK, http.MethodGet, "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	tb := decode[metav1.Table](t, b)
	col := map[string]int{}
	for i, c := range tb.ColumnDefinitions {
		col[c.Name] = i
	}
	cq, lq := col["Position in ClusterQueue"], col["Position in LocalQueue"]
	if cq == 0 || lq == 0 || len(tb.Rows) != 3 {
		t.Fatalf("columns %v, %d rows", col, len(tb.Rows))
	}
	for _, r := range tb.Rows {
		name := r.Cells[0].(string)
		if got := fmt.Sprintf("%v %v", r.Cells[cq], r.Cells[lq]); got != want[name] {
			t.Errorf("%s: positions %s, want %s", name, got, want[name])
		}
	}
}
