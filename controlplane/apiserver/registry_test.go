package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// Concurrent updates: without a resourceVersion every one lands; with the
// same one, exactly one wins and the others get Conflict.
func TestConcurrentUpdates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	obj, err := e.local.Create(ctx, configMap("", "c"))
	if err != nil {
		t.Fatal(err)
	}
	base := obj.(*api.ConfigMap)

	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			cm := api.Clone(base)
			cm.ResourceVersion = ""
			cm.Data = map[string]string{"k": fmt.Sprint(i)}
			_, errs[i] = e.local.Update(ctx, cm)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("unconditional update %d: %v", i, err)
		}
	}

	obj, err = e.local.Get(ctx, cmKind, "default", "c")
	if err != nil {
		t.Fatal(err)
	}
	cur := obj.(*api.ConfigMap)
	wins := 0
	for i := range n {
		wg.Go(func() {
			cm := api.Clone(cur)
			cm.Data = map[string]string{"k": fmt.Sprint("rv", i)}
			_, errs[i] = e.local.Update(ctx, cm)
		})
	}
	wg.Wait()
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !api.IsConflict(err):
			t.Fatalf("conditional update: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d conditional updates won, want 1", wins)
	}
}

func TestUpdateStatusLocal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	obj, err := e.local.Create(ctx, pod("p", nil))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*api.Pod)
	if p.Status.Phase != api.PodPending {
		t.Fatalf("new pod phase %q", p.Status.Phase)
	}
	p.Status.Phase = api.PodRunning
	p.Labels = map[string]string{"ignored": "yes"}
	out, err := e.local.UpdateStatus(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*api.Pod)
	if got.Status.Phase != api.PodRunning || got.Labels["ignored"] != "" {
		t.Fatalf("status update: phase %q labels %v", got.Status.Phase, got.Labels)
	}
	if _, err := e.local.UpdateStatus(ctx, configMap("", "x")); !api.IsNotFound(err) {
		t.Fatalf("status of a configmap: %v", err)
	}
	// A finished pod on a node is deleted at once.
	if err := e.local.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Name: "p"}, Target: api.ObjectReference{Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	obj, _ = e.local.Get(ctx, podKind, "", "p")
	p = obj.(*api.Pod)
	p.Status.Phase = api.PodSucceeded
	if _, err := e.local.UpdateStatus(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := e.local.Delete(ctx, podKind, "", "p", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.local.Get(ctx, podKind, "", "p"); !api.IsNotFound(err) {
		t.Fatalf("finished pod: %v", err)
	}
}

// tryTwiceStore runs each GuaranteedUpdate's tryUpdate once more than the
// store does, first on a copy of the stored object, and then scribbles on
// that try's result, as a store may on what tryUpdate gave it: a try lost
// to a conflict.
type tryTwiceStore struct {
	*store.Bolt
}

func (s tryTwiceStore) GuaranteedUpdate(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error) {
	cur, err := s.Get(ctx, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	if lost, err := tryUpdate(cur); err == nil {
		if p, ok := lost.(*api.Pod); ok {
			p.Status.Message = "scribbled"
			for i := range p.Status.Conditions {
				p.Status.Conditions[i].Reason = "Scribbled"
			}
		}
	}
	return s.Bolt.GuaranteedUpdate(ctx, kind, namespace, name, tryUpdate)
}

// A status update takes only the identity and the status of what it is
// given (the scheduler sends no more), and a retried try writes the
// status given, whatever became of an earlier try's object.
func TestUpdateStatusRetriedTakesOnlyTheStatus(t *testing.T) {
	reg := NewRegistry(tryTwiceStore{defaultsStore(t, store.Options{NoSync: true})}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	obj, err := reg.Create(ctx, podKind, pod("p", map[string]string{"app": "web"}))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*api.Pod)
	in := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Status: api.PodStatus{Phase: api.PodPending, Conditions: []api.PodCondition{
			{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}}}
	want := api.Clone(in)
	out, err := reg.UpdateStatus(ctx, podKind, in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*api.Pod)
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("the caller's pod was changed: %+v", in.Status)
	}
	if c := got.Status.Conditions; got.Status.Message != "" || len(c) != 1 || c[0].Reason != "Unschedulable" || c[0].Message != "0/1 nodes are available" {
		t.Fatalf("stored status %+v", got.Status)
	}
	if len(got.Spec.Containers) != 1 || got.Labels["app"] != "web" || got.Generation != p.Generation {
		t.Fatalf("a status update changed more than the status: spec %+v labels %v generation %d", got.Spec, got.Labels, got.Generation)
	}
}

// A create's response is the JSON the store wrote (Registry.CreateEncoded),
// byte for byte what encoding the created object gives: a GET of it right
// after answers the same body.
func TestCreateRespondsWithTheStoredJSON(t *testing.T) {
	e := newEnv(t)
	p := pod("web", map[string]string{"app": "web"})
	p.Annotations = map[string]string{"note": "<b>&</b>"} // encoding/json escapes these: both sides must
	created := e.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", p)
	got := e.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/web", nil)
	if string(created) != string(got) {
		t.Fatalf("the create's response is not the GET's:\n%s\n%s", created, got)
	}
	if !strings.HasSuffix(string(created), "}\n") || !strings.Contains(string(created), `"resourceVersion"`) || !strings.Contains(string(created), `\u003cb\u003e`) {
		t.Fatalf("the create's response: %s", created)
	}
}

// A list by spec.nodeName decodes only the pods whose JSON names the node
// (store.FilteredLister), and the selector still decides: a pod that
// names it elsewhere (its nodeSelector) is not listed.
func TestListByNodeNameIsTheSelectorsAnswer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for name, node := range map[string]string{"a": "n1", "b": "n2", "c": "n2", "d": ""} {
		p := pod(name, nil)
		p.Spec.NodeName = node
		if name == "c" {
			p.Spec.NodeSelector = map[string]string{"nodeName": "n1"}
		}
		if _, err := e.local.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_, rv, err := e.local.List(ctx, podKind, "default", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns   string
		opts api.ListOptions
		want string
	}{
		{"default", api.ListOptions{FieldSelector: "spec.nodeName=n1"}, "a"},
		{"", api.ListOptions{FieldSelector: "spec.nodeName=n1"}, "a"},
		{"default", api.ListOptions{FieldSelector: "spec.nodeName=n1", ResourceVersion: rv}, "a"},
		{"default", api.ListOptions{FieldSelector: "spec.nodeName=n2,metadata.name=c"}, "c"},
		{"default", api.ListOptions{FieldSelector: "spec.nodeName!=n1"}, "b c d"},
		{"default", api.ListOptions{FieldSelector: "spec.nodeName="}, "d"},
		{"default", api.ListOptions{FieldSelector: "spec.nodeName=n3"}, ""},
	} {
		items, _, err := e.local.List(ctx, podKind, c.ns, c.opts)
		if err != nil {
			t.Fatalf("%q %+v: %v", c.ns, c.opts, err)
		}
		var names []string
		for _, o := range items {
			names = append(names, o.GetObjectMeta().Name)
		}
		if got := strings.Join(names, " "); got != c.want {
			t.Errorf("list %q %+v: %q, want %q", c.ns, c.opts, got, c.want)
		}
	}
}

// TestNewUIDIsARandomUUID: a UID is a version 4 (random) UUID of RFC 9562
// in its lowercase text form, as Kubernetes' are, and never repeats.
func TestNewUIDIsARandomUUID(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 2000 {
		uid := newUID()
		if !form.MatchString(uid) {
			t.Fatalf("UID %q is not a version 4 UUID", uid)
		}
		if seen[uid] {
			t.Fatalf("UID %q repeats", uid)
		}
		seen[uid] = true
	}
}
