package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/pki/pkitest"
)

const cmPath = "/api/v1/namespaces/default/configmaps"

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, token, path string
		want              int
	}{
		{"no token", "", cmPath, 401},
		{"wrong token", "nope", cmPath, 401},
		{"token prefix", testToken[:4], cmPath, 401},
		{"right token", testToken, cmPath, 200},
		{"healthz open", "", "/healthz", 200},
		{"readyz open", "", "/readyz", 200},
		{"version open", "", "/version", 200},
		{"metrics closed", "", "/metrics", 401},
		{"discovery closed", "", "/api/v1", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.doToken(tc.token, "GET", tc.path, nil)
			if code != tc.want {
				t.Fatalf("got %d, want %d: %s", code, tc.want, b)
			}
			if code == 401 {
				status(t, b, 401, api.ReasonUnauthorized)
			}
		})
	}
	_, b := e.doToken("", "GET", "/version", nil)
	if !strings.Contains(string(b), `"gitVersion":"v1.32.0+skiff-dev"`) {
		t.Errorf("version: %s", b)
	}
	// A rejected create changes nothing.
	code, _ := e.doToken("", "POST", cmPath, configMap("default", "sneaky"))
	if code != 401 {
		t.Fatalf("create without token: %d", code)
	}
	e.must(404, "GET", cmPath+"/sneaky", nil)
}

func TestCRUD(t *testing.T) {
	e := newEnv(t)
	b := e.must(201, "POST", cmPath, configMap("", "conf"))
	cm := decode[api.ConfigMap](t, b)
	if cm.UID == "" || cm.ResourceVersion == "" || cm.Generation != 1 || cm.CreationTimestamp.IsZero() || cm.Namespace != "default" {
		t.Fatalf("server-owned fields not set: %+v", cm.ObjectMeta)
	}
	if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		t.Fatalf("type meta: %+v", cm.TypeMeta)
	}

	got := decode[api.ConfigMap](t, e.must(200, "GET", cmPath+"/conf", nil))
	if got.UID != cm.UID {
		t.Fatalf("get: uid %q, want %q", got.UID, cm.UID)
	}

	st := status(t, e.must(409, "POST", cmPath, configMap("", "conf")), 409, api.ReasonAlreadyExists)
	if st.Message != `configmaps "conf" already exists` {
		t.Errorf("message %q", st.Message)
	}

	got.Data["k"] = "v2"
	upd := decode[api.ConfigMap](t, e.must(200, "PUT", cmPath+"/conf", got))
	if upd.Data["k"] != "v2" || upd.ResourceVersion == got.ResourceVersion || upd.UID != cm.UID || upd.Generation != 2 {
		t.Fatalf("update: %+v", upd)
	}

	// The stale resourceVersion of the first read is a Conflict.
	got.Data["k"] = "v3"
	status(t, e.must(409, "PUT", cmPath+"/conf", got), 409, api.ReasonConflict)

	// An update with nothing changed writes nothing.
	same := decode[api.ConfigMap](t, e.must(200, "PUT", cmPath+"/conf", upd))
	if same.ResourceVersion != upd.ResourceVersion {
		t.Errorf("no-op update bumped resourceVersion %s → %s", upd.ResourceVersion, same.ResourceVersion)
	}

	list := decode[struct {
		api.TypeMeta
		Metadata api.ListMeta    `json:"metadata"`
		Items    []api.ConfigMap `json:"items"`
	}](t, e.must(200, "GET", cmPath, nil))
	if list.Kind != "ConfigMapList" || list.APIVersion != "v1" || list.Metadata.ResourceVersion == "" || len(list.Items) != 1 || list.Items[0].Kind != "ConfigMap" {
		t.Fatalf("list: %+v", list)
	}

	e.must(200, "DELETE", cmPath+"/conf", nil)
	st = status(t, e.must(404, "GET", cmPath+"/conf", nil), 404, api.ReasonNotFound)
	if st.Message != `configmaps "conf" not found` {
		t.Errorf("message %q", st.Message)
	}
	status(t, e.must(404, "DELETE", cmPath+"/conf", nil), 404, api.ReasonNotFound)

	// Cluster-scoped: nodes.
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}}
	e.must(201, "POST", "/api/v1/nodes", node)
	e.must(200, "GET", "/api/v1/nodes/n1", nil)
	// Lists across namespaces.
	e.must(201, "POST", cmPath, configMap("", "a"))
	e.must(200, "GET", "/api/v1/configmaps", nil)
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, method, path string
		body               any
		code               int
		reason             api.StatusReason
		msg                string
	}{
		{"unknown resource", "GET", "/api/v1/namespaces/default/widgets", nil, 404, api.ReasonNotFound, "could not find"},
		{"unknown group", "GET", "/apis/nope/v1/things", nil, 404, api.ReasonNotFound, ""},
		{"namespaced object without namespace", "GET", "/api/v1/pods/x", nil, 404, api.ReasonNotFound, ""},
		{"too deep", "GET", cmPath + "/a/b/c", nil, 404, api.ReasonNotFound, ""},
		{"unknown subresource", "GET", cmPath + "/a/frobnicate", nil, 404, api.ReasonNotFound, ""},
		{"kind mismatch", "POST", cmPath, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, api.ReasonBadRequest, "kind in the data (Secret)"},
		{"version mismatch", "POST", cmPath, `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 400, api.ReasonBadRequest, "API version in the data (apps/v1)"},
		{"namespace mismatch", "POST", cmPath, configMap("other", "x"), 400, api.ReasonBadRequest, "namespace of the provided object"},
		{"name mismatch", "PUT", cmPath + "/y", configMap("default", "x"), 400, api.ReasonBadRequest, "does not match the name on the URL"},
		{"not json", "POST", cmPath, `{"apiVersion":`, 400, api.ReasonBadRequest, ""},
		{"unknown field", "POST", cmPath, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dta":{}}`, 400, api.ReasonBadRequest, "dta"},
		{"empty body", "POST", cmPath, "", 400, api.ReasonBadRequest, "empty"},
		{"no name", "POST", cmPath, `{"apiVersion":"v1","kind":"ConfigMap"}`, 422, api.ReasonInvalid, "metadata.name: Required value"},
		{"bad name", "POST", cmPath, configMap("", "Bad_Name"), 422, api.ReasonInvalid, "metadata.name"},
		{"missing namespace", "POST", "/api/v1/namespaces/nowhere/configmaps", configMap("", "x"), 404, api.ReasonNotFound, `namespaces "nowhere" not found`},
		{"resourceVersion on create", "POST", cmPath, `{"metadata":{"name":"x","resourceVersion":"3"}}`, 400, api.ReasonBadRequest, "resourceVersion"},
		{"method", "PUT", cmPath, configMap("", "x"), 405, api.ReasonMethodNotAllowd, ""},
		{"internal kind write", "POST", "/apis/skiff.dev/v1/namespaces/default/podtraces", `{}`, 405, api.ReasonMethodNotAllowd, ""},
		{"bad label selector", "GET", cmPath + "?labelSelector=a%20in", nil, 400, api.ReasonBadRequest, "label selector"},
		{"bad field selector", "GET", cmPath + "?fieldSelector=spec.nodeName%3Dx", nil, 400, api.ReasonBadRequest, "field label not supported"},
		{"bad watch rv", "GET", cmPath + "?watch=1&resourceVersion=abc", nil, 400, api.ReasonBadRequest, "resourceVersion"},
		{"server-side apply without fieldManager", "PATCH", cmPath + "/x", `{}`, 422, api.ReasonInvalid, "fieldManager: Required value: is required for apply patch"},
		{"server dry run of another value", "POST", cmPath + "?dryRun=Some", configMap("", "x"), 422, api.ReasonInvalid, `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"`},
		{"orphan propagation", "DELETE", cmPath + "/x?propagationPolicy=Orphan", nil, 400, api.ReasonBadRequest, `Unsupported value: "Orphan"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := []string{}
			if tc.method == "PATCH" {
				header = []string{"Content-Type", "application/apply-patch+yaml"}
			}
			code, b := e.do(tc.method, tc.path, tc.body, header...)
			if code != tc.code {
				t.Fatalf("got %d, want %d: %s", code, tc.code, b)
			}
			st := status(t, b, tc.code, tc.reason)
			if !strings.Contains(st.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", st.Message, tc.msg)
			}
		})
	}
	// None of it changed anything.
	list := decode[struct {
		Items []api.ConfigMap `json:"items"`
	}](t, e.must(200, "GET", "/api/v1/configmaps", nil))
	if len(list.Items) != 0 {
		t.Fatalf("bad input created %d objects", len(list.Items))
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t)
	big := configMap("", "big")
	big.Data["k"] = strings.Repeat("x", 10<<20)
	start := time.Now()
	code, b := e.do("POST", cmPath, big)
	t.Logf("10 MB body answered in %v", time.Since(start))
	if code != 413 {
		t.Fatalf("10 MB body: got %d: %.200s", code, b)
	}
	status(t, b, 413, api.ReasonTooLarge)
	e.must(404, "GET", cmPath+"/big", nil)

	// Without Content-Length (chunked), the limit holds while reading.
	req, _ := http.NewRequest("POST", e.ts.URL+cmPath, &endlessReader{})
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.ContentLength = -1
	start = time.Now()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Logf("endless body answered in %v", time.Since(start))
	if resp.StatusCode != 413 {
		t.Fatalf("chunked endless body: got %d", resp.StatusCode)
	}
}

// endlessReader is a JSON body that never ends.
type endlessReader struct{ started bool }

func (r *endlessReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		return copy(p, `{"metadata":{"name":"x"},"data":{"k":"`), nil
	}
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestListSelectors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range []*api.Pod{pod("a", map[string]string{"app": "web", "tier": "fe"}), pod("b", map[string]string{"app": "web"}), pod("c", map[string]string{"app": "db"})} {
		if _, err := e.local.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.local.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Name: "b", Namespace: "default"}, Target: api.ObjectReference{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"", "a,b,c"},
		{"labelSelector=app%3Dweb", "a,b"},
		{"labelSelector=app%20in%20(db),!tier", "c"},
		{"labelSelector=tier", "a"},
		{"fieldSelector=spec.nodeName%3Dn1", "b"},
		{"fieldSelector=spec.nodeName%3D", "a,c"},
		{"fieldSelector=metadata.name!%3Da&labelSelector=app%3Dweb", "b"},
		{"fieldSelector=status.phase%3DPending", "a,b,c"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			list := decode[struct {
				Items []api.Pod `json:"items"`
			}](t, e.must(200, "GET", "/api/v1/namespaces/default/pods?"+tc.query, nil))
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", cmPath, configMap("", "before"))

	// resourceVersion "" : the current objects first, then changes.
	w := e.watch(cmPath + "?watch=true")
	w.expect(api.Added, "before")
	b := e.must(201, "POST", cmPath, configMap("", "x"))
	w.expect(api.Added, "x")
	cm := decode[api.ConfigMap](t, b)
	cm.Data["k"] = "changed"
	e.must(200, "PUT", cmPath+"/x", cm)
	ev := w.expect(api.Modified, "x")
	if !strings.Contains(string(ev.Object), `"kind":"ConfigMap"`) || !strings.Contains(string(ev.Object), "changed") {
		t.Errorf("modified object: %s", ev.Object)
	}
	e.must(200, "DELETE", cmPath+"/x", nil)
	w.expect(api.Deleted, "x")

	// From a resourceVersion: only what came after it, replayed.
	w2 := e.watch(cmPath + "?watch=1&resourceVersion=" + cm.ResourceVersion)
	w2.expect(api.Modified, "x")
	w2.expect(api.Deleted, "x")

	// timeoutSeconds ends the stream.
	w3 := e.watch(cmPath + "?watch=1&timeoutSeconds=1")
	w3.expect(api.Added, "before")
	w3.ended()
}

func TestWatchTooOld(t *testing.T) {
	e := newEnvWith(t, store.Options{NoSync: true, HistorySize: 2})
	for i := range 5 {
		e.must(201, "POST", cmPath, configMap("", fmt.Sprintf("c%d", i)))
	}
	w := e.watch(cmPath + "?watch=1&resourceVersion=1")
	ev := w.next()
	if ev.Type != api.Error {
		t.Fatalf("got %s, want ERROR: %s", ev.Type, ev.Object)
	}
	st := decode[api.Status](t, ev.Object)
	if st.Code != 410 || !api.IsGone(&api.StatusError{Status: *st}) {
		t.Fatalf("error event: %+v", st)
	}
	w.ended()

	// Local: a watcher that ends at once with Gone.
	lw, err := e.local.Watch(context.Background(), cmKind, "default", api.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-lw.Events(); ok {
		t.Fatal("events from a too-old watch")
	}
	if !api.IsGone(lw.Err()) {
		t.Fatalf("Err = %v, want Gone", lw.Err())
	}
	lw.Stop()
}

func TestWatchSelectorTransitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.local.Create(ctx, pod("p", map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	// The scheduler's view: unscheduled pods. Binding takes the pod out.
	w := e.watch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D")
	w.expect(api.Added, "p")
	lbl := e.watch("/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Ddb")
	if err := e.local.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Name: "p"}, Target: api.ObjectReference{Kind: "Node", Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	w.expect(api.Deleted, "p")

	// A label change brings it into a label watch as ADDED.
	obj, err := e.local.Get(ctx, podKind, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*api.Pod)
	p.Labels["app"] = "db"
	if _, err := e.local.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	lbl.expect(api.Added, "p")
}

func TestGracefulPodDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	podPath := "/api/v1/namespaces/default/pods"

	// Unbound: deleted at once.
	e.must(201, "POST", podPath, pod("free", nil))
	e.must(200, "DELETE", podPath+"/free", nil)
	e.must(404, "GET", podPath+"/free", nil)

	// Bound: deletionTimestamp, the node finishes it.
	p := pod("bound", nil)
	grace := int64(20)
	p.Spec.TerminationGracePeriodSeconds = &grace
	e.must(201, "POST", podPath, p)
	e.must(201, "POST", podPath+"/bound/binding", `{"target":{"kind":"Node","name":"n1"}}`)
	before := time.Now()
	got := decode[api.Pod](t, e.must(202, "DELETE", podPath+"/bound", nil))
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 20 {
		t.Fatalf("graceful delete: %+v", got.ObjectMeta)
	}
	if d := got.DeletionTimestamp.Sub(before); d < 18*time.Second || d > 22*time.Second {
		t.Errorf("deletionTimestamp %v after the request, want about 20s", d)
	}
	e.must(200, "GET", podPath+"/bound", nil)
	// A shorter grace period (DeleteOptions body) shortens it.
	got = decode[api.Pod](t, e.must(202, "DELETE", podPath+"/bound", `{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5}`))
	if *got.DeletionGracePeriodSeconds != 5 {
		t.Fatalf("shortened grace: %d", *got.DeletionGracePeriodSeconds)
	}
	// An update keeps the deletion fields.
	got.Labels = map[string]string{"x": "y"}
	upd := decode[api.Pod](t, e.must(200, "PUT", podPath+"/bound", got))
	if upd.DeletionTimestamp == nil {
		t.Fatal("update cleared deletionTimestamp")
	}
	if _, err := e.local.GetTrace(ctx, "default", "bound"); err != nil {
		t.Fatal(err)
	}
	// The node: gracePeriodSeconds=0 removes it.
	e.must(200, "DELETE", podPath+"/bound?gracePeriodSeconds=0", nil)
	e.must(404, "GET", podPath+"/bound", nil)
	if _, err := e.st.Get(ctx, traceKind, "default", "bound"); !api.IsNotFound(err) {
		t.Fatalf("trace survived its pod: %v", err)
	}

	// Preconditions.
	e.must(201, "POST", podPath, pod("pre", nil))
	status(t, e.must(409, "DELETE", podPath+"/pre", `{"preconditions":{"uid":"not-it"}}`), 409, api.ReasonConflict)
	e.must(200, "GET", podPath+"/pre", nil)
}

func TestFinalizers(t *testing.T) {
	e := newEnv(t)
	cm := configMap("", "held")
	cm.Finalizers = []string{"example.com/hold"}
	e.must(201, "POST", cmPath, cm)
	got := decode[api.ConfigMap](t, e.must(202, "DELETE", cmPath+"/held", nil))
	if got.DeletionTimestamp == nil {
		t.Fatal("no deletionTimestamp")
	}
	got.Finalizers = nil
	e.must(200, "PUT", cmPath+"/held", got)
	e.must(404, "GET", cmPath+"/held", nil)
}

func TestNamespaceLifecycle(t *testing.T) {
	e := newEnv(t)
	ns := decode[api.Namespace](t, e.must(201, "POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}`))
	if ns.Status.Phase != api.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != NamespaceFinalizer {
		t.Fatalf("new namespace: %+v %+v", ns.Spec, ns.Status)
	}
	e.must(201, "POST", "/api/v1/namespaces/team/configmaps", configMap("", "c"))

	// An update may not drop the spec finalizer.
	ns.Spec.Finalizers = nil
	upd := decode[api.Namespace](t, e.must(200, "PUT", "/api/v1/namespaces/team", ns))
	if len(upd.Spec.Finalizers) != 1 {
		t.Fatal("update changed spec.finalizers")
	}

	got := decode[api.Namespace](t, e.must(202, "DELETE", "/api/v1/namespaces/team", nil))
	if got.Status.Phase != api.NamespaceTerminating || got.DeletionTimestamp == nil {
		t.Fatalf("deleting namespace: %+v", got)
	}
	st := status(t, e.must(403, "POST", "/api/v1/namespaces/team/configmaps", configMap("", "d")), 403, api.ReasonForbidden)
	if !strings.Contains(st.Message, "because it is being terminated") {
		t.Errorf("message %q", st.Message)
	}
	// The namespace controller empties it, then finalizes.
	e.must(200, "DELETE", "/api/v1/namespaces/team/configmaps/c", nil)
	got.Spec.Finalizers = nil
	e.must(200, "PUT", "/api/v1/namespaces/team/finalize", got)
	e.must(404, "GET", "/api/v1/namespaces/team", nil)

	// Local path.
	ctx := context.Background()
	if _, err := e.local.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Delete(ctx, namespaceKind, "", "lab", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.local.FinalizeNamespace(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.local.Get(ctx, namespaceKind, "", "lab"); !api.IsNotFound(err) {
		t.Fatalf("finalized namespace: %v", err)
	}

	// The immortal namespaces, in NamespaceLifecycle's words; all four
	// system namespaces exist from the start.
	for _, name := range api.SystemNamespaces {
		e.must(200, "GET", "/api/v1/namespaces/"+name, nil)
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		st = status(t, e.must(403, "DELETE", "/api/v1/namespaces/"+name, nil), 403, api.ReasonForbidden)
		if want := `namespaces "` + name + `" is forbidden: this namespace may not be deleted`; st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
	}
	// kube-node-lease may be deleted, as in Kubernetes (it comes back:
	// the namespace controller, EnsureDefaults).
	e.must(202, "DELETE", "/api/v1/namespaces/kube-node-lease", nil)
}

func TestBinding(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "/api/v1/namespaces/default/pods", pod("p", nil))
	b := e.must(201, "POST", "/api/v1/namespaces/default/pods/p/binding", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}`)
	if !strings.Contains(string(b), `"status":"Success"`) {
		t.Errorf("binding response: %s", b)
	}
	p := decode[api.Pod](t, e.must(200, "GET", "/api/v1/namespaces/default/pods/p", nil))
	if p.Spec.NodeName != "n1" {
		t.Fatalf("nodeName %q", p.Spec.NodeName)
	}
	if len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != api.PodScheduled || p.Status.Conditions[0].Status != api.ConditionTrue {
		t.Fatalf("conditions %+v", p.Status.Conditions)
	}
	st := status(t, e.must(409, "POST", "/api/v1/namespaces/default/pods/p/binding", `{"target":{"name":"n2"}}`), 409, api.ReasonConflict)
	if !strings.Contains(st.Message, `pod p is already assigned to node "n1"`) {
		t.Errorf("message %q", st.Message)
	}
	status(t, e.must(422, "POST", "/api/v1/namespaces/default/pods/p/binding", `{"target":{}}`), 422, api.ReasonInvalid)
	status(t, e.must(404, "POST", "/api/v1/namespaces/default/pods/nope/binding", `{"target":{"name":"n1"}}`), 404, api.ReasonNotFound)

	// An update that leaves nodeName out keeps the binding.
	p.Spec.NodeName = ""
	upd := decode[api.Pod](t, e.must(200, "PUT", "/api/v1/namespaces/default/pods/p", p))
	if upd.Spec.NodeName != "n1" {
		t.Fatalf("update lost nodeName")
	}
}

func TestScale(t *testing.T) {
	e := newEnv(t)
	dp := "/apis/apps/v1/namespaces/default/deployments"
	e.must(201, "POST", dp, deployment("web", 3))
	sc := decode[api.Scale](t, e.must(200, "GET", dp+"/web/scale", nil))
	if sc.Spec.Replicas != 3 || sc.Kind != "Scale" || sc.Status.Selector != "app=web" {
		t.Fatalf("scale %+v", sc)
	}
	sc.Spec.Replicas = 5
	out := decode[api.Scale](t, e.must(200, "PUT", dp+"/web/scale", sc))
	if out.Spec.Replicas != 5 {
		t.Fatalf("scale put: %+v", out)
	}
	d := decode[api.Deployment](t, e.must(200, "GET", dp+"/web", nil))
	if *d.Spec.Replicas != 5 || d.Generation != 2 {
		t.Fatalf("deployment after scale: replicas %d generation %d", *d.Spec.Replicas, d.Generation)
	}
	// Stale resourceVersion.
	status(t, e.must(409, "PUT", dp+"/web/scale", sc), 409, api.ReasonConflict)
	// Patch.
	e.must(200, "PATCH", dp+"/web/scale", `{"spec":{"replicas":2}}`, "Content-Type", "application/merge-patch+json")
	d = decode[api.Deployment](t, e.must(200, "GET", dp+"/web", nil))
	if *d.Spec.Replicas != 2 {
		t.Fatalf("patched replicas %d", *d.Spec.Replicas)
	}
	status(t, e.must(422, "PUT", dp+"/web/scale", `{"spec":{"replicas":-1}}`), 422, api.ReasonInvalid)
	status(t, e.must(404, "GET", cmPath+"/x/scale", nil), 404, api.ReasonNotFound)

	// Local.
	ctx := context.Background()
	s, err := e.local.GetScale(ctx, deploymentKind, "default", "web")
	if err != nil || s.Spec.Replicas != 2 {
		t.Fatalf("local get scale: %v %+v", err, s)
	}
	s.Spec.Replicas = 0
	if _, err := e.local.UpdateScale(ctx, deploymentKind, "default", "web", s); err != nil {
		t.Fatal(err)
	}
}

func TestStatusSubresource(t *testing.T) {
	e := newEnv(t)
	dp := "/apis/apps/v1/namespaces/default/deployments"
	d := deployment("web", 1)
	d.Status.Replicas = 7 // ignored on create
	created := decode[api.Deployment](t, e.must(201, "POST", dp, d))
	if created.Status.Replicas != 0 {
		t.Fatalf("create kept client status: %+v", created.Status)
	}

	// PUT status: status changes, spec changes are ignored.
	s := *created
	s.Status.Replicas = 1
	s.Status.ObservedGeneration = 1
	three := int32(3)
	s.Spec.Replicas = &three
	st := decode[api.Deployment](t, e.must(200, "PUT", dp+"/web/status", &s))
	if st.Status.Replicas != 1 || *st.Spec.Replicas != 1 || st.Generation != 1 {
		t.Fatalf("status update: status %+v replicas %d generation %d", st.Status, *st.Spec.Replicas, st.Generation)
	}

	// PUT object: spec changes, status changes are ignored.
	st.Status.Replicas = 99
	st.Spec.Replicas = &three
	up := decode[api.Deployment](t, e.must(200, "PUT", dp+"/web", st))
	if up.Status.Replicas != 1 || *up.Spec.Replicas != 3 || up.Generation != 2 {
		t.Fatalf("update: status %+v replicas %d generation %d", up.Status, *up.Spec.Replicas, up.Generation)
	}

	// Metadata-only change: no generation bump.
	up.Labels = map[string]string{"team": "a"}
	lab := decode[api.Deployment](t, e.must(200, "PUT", dp+"/web", up))
	if lab.Generation != 2 {
		t.Fatalf("label change bumped generation to %d", lab.Generation)
	}

	// Status patch.
	e.must(200, "PATCH", dp+"/web/status", `{"status":{"readyReplicas":1},"spec":{"replicas":9}}`, "Content-Type", "application/merge-patch+json")
	got := decode[api.Deployment](t, e.must(200, "GET", dp+"/web", nil))
	if got.Status.ReadyReplicas != 1 || *got.Spec.Replicas != 3 {
		t.Fatalf("status patch: ready %d replicas %d", got.Status.ReadyReplicas, *got.Spec.Replicas)
	}
	// No status subresource on configmaps.
	e.must(201, "POST", cmPath, configMap("", "c"))
	e.must(404, "PUT", cmPath+"/c/status", configMap("", "c"))
}

func TestTrace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.must(201, "POST", "/api/v1/namespaces/default/pods", pod("p", nil))
	tr := decode[api.PodTrace](t, e.must(200, "GET", "/api/v1/namespaces/default/pods/p/trace", nil))
	if len(tr.Spans) != 1 || tr.Spans[0].Component != "apiserver" || tr.Spans[0].Step != "create" || tr.Spans[0].End.Before(tr.Spans[0].Start.Time) {
		t.Fatalf("create span: %+v", tr.Spans)
	}
	// Posted as an array (the client) or as a PodTrace.
	now := api.MicroTime{Time: time.Now()}
	e.must(201, "POST", "/api/v1/namespaces/default/pods/p/trace", []api.TraceSpan{{Component: "scheduler", Step: "filter", Start: now, End: now}})
	e.must(201, "POST", "/api/v1/namespaces/default/pods/p/trace", api.PodTrace{Spans: []api.TraceSpan{{Component: "scheduler", Step: "bind", Start: now, End: now}}})
	status(t, e.must(422, "POST", "/api/v1/namespaces/default/pods/p/trace", `[{"component":"x"}]`), 422, api.ReasonInvalid)
	status(t, e.must(404, "POST", "/api/v1/namespaces/default/pods/nope/trace", `[]`), 404, api.ReasonNotFound)

	// Bounded: the oldest go.
	var spans []api.TraceSpan
	for i := range api.MaxTraceSpans + 50 {
		spans = append(spans, api.TraceSpan{Component: "agent", Step: fmt.Sprint(i), Start: now, End: now})
	}
	for _, batch := range [][]api.TraceSpan{spans[:150], spans[150:]} {
		if err := e.local.AddTrace(ctx, "default", "p", batch...); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.local.GetTrace(ctx, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spans) != api.MaxTraceSpans || got.Spans[len(got.Spans)-1].Step != fmt.Sprint(api.MaxTraceSpans+49) || got.Spans[0].Step != "50" {
		t.Fatalf("bounded trace: %d spans, first %q last %q", len(got.Spans), got.Spans[0].Step, got.Spans[len(got.Spans)-1].Step)
	}
	// A new pod with the same name starts a new trace.
	e.must(200, "DELETE", "/api/v1/namespaces/default/pods/p", nil)
	e.must(201, "POST", "/api/v1/namespaces/default/pods", pod("p", nil))
	got, err = e.local.GetTrace(ctx, "default", "p")
	if err != nil || len(got.Spans) != 1 {
		t.Fatalf("new pod's trace: %v %d spans", err, len(got.Spans))
	}
	// Traces are readable, not writable, as objects.
	e.must(200, "GET", "/apis/skiff.dev/v1/namespaces/default/podtraces/p", nil)
	e.must(405, "DELETE", "/apis/skiff.dev/v1/namespaces/default/podtraces/p", nil)
}

// An autoscaler's trace holds its controller's decisions (api/trace_hpa.go):
// posted and read at horizontalpodautoscalers/NAME/trace, in memory, gone
// with the autoscaler; listed in discovery.
func TestHPATrace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hp := "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
	e.must(201, "POST", hp, `{"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":3}}`)
	if tr := decode[api.PodTrace](t, e.must(200, "GET", hp+"/h/trace", nil)); len(tr.Spans) != 0 || tr.OwnerReferences[0].Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("a new autoscaler's trace: %+v", tr)
	}
	now := time.Now()
	e.must(201, "POST", hp+"/h/trace", []api.TraceSpan{api.NewHPADecisionSpan(now, now, 1, 2, []string{"scaled 1 -> 2"})})
	if err := e.local.AddObjectTrace(ctx, hpaKind, "default", "h", api.NewHPADecisionSpan(now, now, 2, 2, []string{"proposal 2 -> 2"})); err != nil {
		t.Fatal(err)
	}
	ds := api.HPADecisions(decode[api.PodTrace](t, e.must(200, "GET", hp+"/h/trace", nil)).Spans)
	if len(ds) != 2 || ds[0].CurrentReplicas != 1 || ds[0].DesiredReplicas != 2 || ds[0].Steps[0] != "scaled 1 -> 2" || ds[1].Steps[0] != "proposal 2 -> 2" {
		t.Fatalf("decisions read back: %+v", ds)
	}
	status(t, e.must(404, "POST", hp+"/nope/trace", `[]`), 404, api.ReasonNotFound)
	status(t, e.must(422, "POST", hp+"/h/trace", `[{"component":"x"}]`), 422, api.ReasonInvalid)
	e.must(404, "GET", "/apis/apps/v1/namespaces/default/deployments/web/trace", nil)
	if b := e.must(200, "GET", "/apis/autoscaling/v2", nil); !strings.Contains(string(b), `"name":"horizontalpodautoscalers/trace"`) {
		t.Errorf("discovery lacks horizontalpodautoscalers/trace: %s", b)
	}
	// Gone with the autoscaler: a new one of that name starts empty.
	e.must(200, "DELETE", hp+"/h", nil)
	e.must(201, "POST", hp, `{"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":3}}`)
	if tr := decode[api.PodTrace](t, e.must(200, "GET", hp+"/h/trace", nil)); len(tr.Spans) != 0 {
		t.Fatalf("a new autoscaler of the same name: %d spans", len(tr.Spans))
	}
}

func TestDiscoveryAndMetrics(t *testing.T) {
	e := newEnv(t)
	b := e.must(200, "GET", "/api/v1", nil)
	for _, want := range []string{`"name":"pods"`, `"shortNames":["po"]`, `"name":"pods/binding"`, `"name":"namespaces/finalize"`, `"namespaced":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/api/v1 lacks %s", want)
		}
	}
	b = e.must(200, "GET", "/apis/apps/v1", nil)
	if !strings.Contains(string(b), `"name":"deployments/scale"`) || !strings.Contains(string(b), `"shortNames":["deploy"]`) {
		t.Errorf("/apis/apps/v1: %s", b)
	}
	b = e.must(200, "GET", "/apis", nil)
	if !strings.Contains(string(b), `"groupVersion":"apps/v1"`) {
		t.Errorf("/apis: %s", b)
	}
	e.must(200, "GET", "/api", nil)
	e.must(200, "GET", "/apis/apps", nil)

	e.must(201, "POST", cmPath, configMap("", "m"))
	e.must(404, "GET", cmPath+"/nope", nil)
	b = e.must(200, "GET", "/metrics", nil)
	for _, want := range []string{
		`apiserver_request_total{code="201",resource="configmaps",verb="create"} 1`,
		`apiserver_request_total{code="404",resource="configmaps",verb="get"} 1`,
		`apiserver_request_duration_seconds_bucket`,
		`skiff_store_writes_total`,
		`skiff_store_revision`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestLocal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := configMap("", "")
	in.GenerateName = "gen-"
	obj, err := e.local.Create(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "" || in.UID != "" {
		t.Fatal("Create changed the caller's object")
	}
	cm := obj.(*api.ConfigMap)
	if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) != len("gen-")+5 {
		t.Fatalf("generated name %q", cm.Name)
	}

	w, err := e.local.Watch(ctx, cmKind, "", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() (api.WatchEventType, string) {
		t.Helper()
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			return ev.Type, ev.Object.GetObjectMeta().Name
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
		return "", ""
	}
	if typ, name := next(); typ != api.Added || name != cm.Name {
		t.Fatalf("initial: %s %s", typ, name)
	}
	cm.Data["k"] = "2"
	if _, err := e.local.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if typ, _ := next(); typ != api.Modified {
		t.Fatalf("got %s, want MODIFIED", typ)
	}
	// Stale update.
	if _, err := e.local.Update(ctx, cm); !api.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	if err := e.local.Delete(ctx, cmKind, "default", cm.Name, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if typ, _ := next(); typ != api.Deleted {
		t.Fatalf("got %s, want DELETED", typ)
	}
	w.Stop()
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Fatal("events after Stop")
	}
	if w.Err() != nil {
		t.Fatalf("Err after Stop: %v", w.Err())
	}

	items, rv, err := e.local.List(ctx, namespaceKind, "", api.ListOptions{})
	var names []string
	for _, o := range items {
		names = append(names, o.GetObjectMeta().Name)
	}
	if err != nil || rv == "" || !slices.Equal(names, []string{"default", api.NamespaceNodeLease, api.NamespacePublic, api.NamespaceSystem}) {
		t.Fatalf("list namespaces: %v %q %v, want the defaults", err, rv, names)
	}
	if _, err := e.local.Create(ctx, configMap("nowhere", "x")); !api.IsNotFound(err) {
		t.Fatalf("create in missing namespace: %v", err)
	}
}

func TestRunShutdown(t *testing.T) {
	srv := startTLSServer(t, nil, nil)
	hc := pkitest.HTTPClient(testCA(t), nil)
	req, _ := http.NewRequest("GET", srv.base+cmPath+"?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	if err := srv.stop(); err != nil { // Run returns, though a watch is open
		t.Fatal(err)
	}
	// The watch stream ended.
	buf := make([]byte, 1)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	if _, err := hc.Get(srv.base + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.Listen = "nope"
	c.MaxRequestBytes = 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), "token") || !strings.Contains(err.Error(), "max request bytes") {
		t.Fatalf("Validate: %v", err)
	}
	c = DefaultConfig()
	c.Token = "t"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig(), nil, nil); err == nil {
		t.Fatal("New accepted a config without token")
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	dir := t.TempDir() + "/data"
	tok, err := LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Fatalf("token %q", tok)
	}
	again, err := LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Fatalf("second load: %q %v", again, err)
	}
	fi, err := statMode(dir + "/token")
	if err != nil || fi != 0o600 {
		t.Fatalf("mode %o %v", fi, err)
	}
	if err := writeFile(dir+"/token", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(dir); err == nil {
		t.Fatal("empty token file accepted")
	}
}

var cmKind = api.MustKindOf(&api.ConfigMap{})

func statMode(path string) (os.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Perm(), nil
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
