package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// labPod is a Deployment's pod as the store holds it once Running: one
// container, the API access volume, four conditions.
func labPod(name string) *Pod {
	t := NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := &Pod{
		ObjectMeta: ObjectMeta{Name: name, Namespace: "lab", Labels: map[string]string{"app": "web", "pod-template-hash": "7dc4b47f4d"}},
		Spec: PodSpec{
			Containers:      []Container{{Name: "web", Image: "nginx:1.27", VolumeMounts: []VolumeMount{{Name: "kube-api-access-x2k9p", MountPath: ServiceAccountMountPath, ReadOnly: true}}}},
			Volumes:         []Volume{APIAccessVolume("kube-api-access-x2k9p")},
			NodeName:        "node-1",
			SecurityContext: &PodSecurityContext{},
		},
		Status: PodStatus{Phase: PodRunning, Conditions: []PodCondition{
			{Type: "PodScheduled", Status: "True", LastTransitionTime: t}, {Type: "Initialized", Status: "True", LastTransitionTime: t},
			{Type: "ContainersReady", Status: "True", LastTransitionTime: t}, {Type: "Ready", Status: "True", LastTransitionTime: t},
		}},
	}
	SetDefaults(p)
	return p
}

// Pods whose API access volume is APIAccessVolume's share one source, and
// pods with an empty securityContext one context; a pod whose source or
// context differs keeps its own; what the pods say does not change.
func TestShareReadOnly(t *testing.T) {
	a, b := labPod("a"), labPod("b")
	other := labPod("c")
	*other.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = 600
	vault := labPod("d")
	vault.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience = "vault"
	before := map[*Pod][]byte{}
	for _, p := range []*Pod{a, b, other, vault} {
		before[p], _ = json.Marshal(p)
		ShareReadOnly(p)
		if after, _ := json.Marshal(p); string(after) != string(before[p]) {
			t.Fatalf("pod %s changed:\n%s\n%s", p.Name, before[p], after)
		}
	}
	if a.Spec.Volumes[0].Projected != b.Spec.Volumes[0].Projected || a.Spec.Volumes[0].Projected != apiAccessProjection {
		t.Error("two pods with the API access volume do not share its source")
	}
	for _, p := range []*Pod{other, vault} {
		if p.Spec.Volumes[0].Projected == apiAccessProjection {
			t.Errorf("pod %s's different source was replaced by the shared one", p.Name)
		}
	}
	if a.Spec.SecurityContext == nil || a.Spec.SecurityContext != b.Spec.SecurityContext {
		t.Error("two pods with an empty securityContext do not share it")
	}
	user := labPod("e")
	user.Spec.SecurityContext = &PodSecurityContext{RunAsUser: new(int64(1000))}
	ShareReadOnly(user)
	if user.Spec.SecurityContext == emptyPodSecurityContext || *user.Spec.SecurityContext.RunAsUser != 1000 {
		t.Error("a pod's own securityContext was replaced by the shared empty one")
	}
	if v := APIAccessVolume("x"); v.Projected == apiAccessProjection {
		t.Error("APIAccessVolume returns the shared source: a caller may change what it gets")
	}
	ShareReadOnly(&ConfigMap{}) // other kinds: nothing to share
}

// The pods of one controller share their labels and owner references
// while they are equal; a pod whose labels differ keeps its own and is
// what the next pods share; another controller's pods, and pods without
// one, share nothing of them.
func TestShareReadOnlyByController(t *testing.T) {
	rs := &ReplicaSet{TypeMeta: TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}, ObjectMeta: ObjectMeta{Name: "web-1", Namespace: "lab", UID: "uid-share-rs-1"}}
	other := &ReplicaSet{TypeMeta: rs.TypeMeta, ObjectMeta: ObjectMeta{Name: "web-2", Namespace: "lab", UID: "uid-share-rs-2"}}
	of := func(owner *ReplicaSet, name string, labels map[string]string) *Pod {
		p := labPod(name)
		p.Labels = labels
		if owner != nil {
			p.OwnerReferences = []OwnerReference{NewControllerRef(owner)}
		}
		return p
	}
	web := func() map[string]string { return map[string]string{"app": "web", "pod-template-hash": "1"} }
	a, b := of(rs, "a", web()), of(rs, "b", web())
	c := of(rs, "c", map[string]string{"app": "web", "pod-template-hash": "1", "canary": "yes"})
	d := of(rs, "d", map[string]string{"app": "web", "pod-template-hash": "1", "canary": "yes"})
	e, orphan := of(other, "e", web()), of(nil, "f", web())
	for _, p := range []*Pod{a, b, c, d, e, orphan} {
		ShareReadOnly(p)
	}
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if !same(a.Labels, b.Labels) || &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("two pods of one ReplicaSet with equal labels and owners share neither")
	}
	if same(c.Labels, a.Labels) || c.Labels["canary"] != "yes" || !same(c.Labels, d.Labels) {
		t.Error("a pod with other labels shares a's, or the next pod with its labels does not share them")
	}
	if &c.OwnerReferences[0] != &a.OwnerReferences[0] {
		t.Error("the canary pod's owner references, the same as a's, are not shared")
	}
	if same(e.Labels, a.Labels) || &e.OwnerReferences[0] == &a.OwnerReferences[0] || e.OwnerReferences[0].UID != other.UID {
		t.Error("another ReplicaSet's pod shares the first one's labels or owners")
	}
	if same(orphan.Labels, a.Labels) {
		t.Error("a pod without a controller shares a controller's labels")
	}
}

// Pods whose conditions are equal in every field share them; a pod whose
// conditions differ in a time keeps its own.
func TestShareReadOnlyConditions(t *testing.T) {
	a, b, later := labPod("a"), labPod("b"), labPod("c")
	later.Status.Conditions[3].LastTransitionTime = NewTime(later.Status.Conditions[3].LastTransitionTime.Add(time.Second))
	for _, p := range []*Pod{a, b, later} {
		ShareReadOnly(p)
	}
	if &a.Status.Conditions[0] != &b.Status.Conditions[0] {
		t.Error("two pods with equal conditions do not share them")
	}
	if &later.Status.Conditions[0] == &a.Status.Conditions[0] || !later.Status.Conditions[3].LastTransitionTime.After(a.Status.Conditions[3].LastTransitionTime.Time) {
		t.Error("a pod ready a second later shares the others' conditions")
	}
}

// Two owner references are the same only when every field is.
// Pods share the small pointers defaulting gives them and their start
// times while the values are equal; a pod whose value differs keeps its
// own; what the pods say does not change.
func TestShareReadOnlySmallAndTimes(t *testing.T) {
	started := NewTime(time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC))
	running := func(name string, at Time) *Pod {
		p := labPod(name)
		p.Status.StartTime = new(at)
		p.Status.ContainerStatuses = []ContainerStatus{{Name: "web", Ready: true, Started: new(true),
			State: ContainerState{Running: &ContainerStateRunning{StartedAt: at}}}}
		return p
	}
	a, b := running("small-a", started), running("small-b", started)
	later := running("small-c", NewTime(started.Add(time.Second)))
	slow := running("small-d", started)
	slow.Spec.TerminationGracePeriodSeconds = new(int64(60))
	slow.Spec.EnableServiceLinks = new(false)
	for _, p := range []*Pod{a, b, later, slow} {
		before, _ := json.Marshal(p)
		ShareReadOnly(p)
		if after, _ := json.Marshal(p); string(after) != string(before) {
			t.Fatalf("pod %s changed:\n%s\n%s", p.Name, before, after)
		}
	}
	if a.Spec.TerminationGracePeriodSeconds != b.Spec.TerminationGracePeriodSeconds || a.Spec.Priority != b.Spec.Priority ||
		a.Spec.PreemptionPolicy != b.Spec.PreemptionPolicy || a.Spec.EnableServiceLinks != b.Spec.EnableServiceLinks ||
		a.Status.ContainerStatuses[0].Started != b.Status.ContainerStatuses[0].Started {
		t.Error("two defaulted pods do not share their small pointers")
	}
	if slow.Spec.TerminationGracePeriodSeconds == a.Spec.TerminationGracePeriodSeconds || *slow.Spec.TerminationGracePeriodSeconds != 60 {
		t.Error("a pod's own grace period was replaced by the shared one")
	}
	if slow.Spec.EnableServiceLinks == a.Spec.EnableServiceLinks || *slow.Spec.EnableServiceLinks || !*a.Spec.EnableServiceLinks {
		t.Error("enableServiceLinks false and true share a pointer")
	}
	if a.Status.StartTime != b.Status.StartTime || a.Status.ContainerStatuses[0].State.Running != b.Status.ContainerStatuses[0].State.Running {
		t.Error("two pods started in the same second do not share their start time and running state")
	}
	if later.Status.StartTime == a.Status.StartTime || later.Status.ContainerStatuses[0].State.Running == a.Status.ContainerStatuses[0].State.Running {
		t.Error("pods started a second apart share a start time")
	}
	if slow.Status.StartTime != a.Status.StartTime {
		t.Error("a pod started in the same second as the first does not share its start time")
	}
}

func TestSameOwnerReference(t *testing.T) {
	ref := func() OwnerReference {
		return NewControllerRef(&ReplicaSet{TypeMeta: TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}, ObjectMeta: ObjectMeta{Name: "web", UID: "u"}})
	}
	if a, b := ref(), ref(); !sameOwnerReference(a, b) {
		t.Fatal("two equal references (pointers to equal values) are not the same")
	}
	n := 0
	for ; ; n++ {
		b := ref()
		i := n
		what, ok := changeNth(reflect.ValueOf(&b).Elem(), &i, "ownerReference")
		if !ok {
			break
		}
		if sameOwnerReference(ref(), b) {
			t.Errorf("%s changed, and the references are still the same", what)
		}
	}
	if n < 8 {
		t.Fatalf("only %d changes tried", n)
	}
}

// Any one change to any field of APIAccessVolume's source makes another
// source, which ShareReadOnly must leave alone.
func TestIsAPIAccessProjection(t *testing.T) {
	if !isAPIAccessProjection(APIAccessVolume("v").Projected) {
		t.Fatal("APIAccessVolume's own source is not taken for it")
	}
	n := 0
	for ; ; n++ {
		p := APIAccessVolume("v").Projected
		i := n
		what, ok := changeNth(reflect.ValueOf(p).Elem(), &i, "projected")
		if !ok {
			break
		}
		if isAPIAccessProjection(p) {
			t.Errorf("%s changed, and it is still taken for the API access source", what)
		}
	}
	if n < 30 {
		t.Fatalf("only %d changes tried", n)
	}
}

// changeNth makes the n-th change (n counts down) a walk of v finds, and
// says which: a string or number changed, a pointer set or unset, a slice
// one element longer or shorter, and so on inside.
func changeNth(v reflect.Value, n *int, path string) (string, bool) {
	try := func(change func()) bool {
		if *n == 0 {
			change()
			return true
		}
		*n--
		return false
	}
	switch v.Kind() {
	case reflect.String:
		if try(func() { v.SetString(v.String() + "x") }) {
			return path, true
		}
	case reflect.Int32, reflect.Int64:
		if try(func() { v.SetInt(v.Int() + 1) }) {
			return path, true
		}
	case reflect.Bool:
		if try(func() { v.SetBool(!v.Bool()) }) {
			return path, true
		}
	case reflect.Pointer:
		if v.IsNil() {
			if try(func() { v.Set(reflect.New(v.Type().Elem())) }) {
				return path + " set", true
			}
			return "", false
		}
		if try(func() { v.Set(reflect.Zero(v.Type())) }) {
			return path + " unset", true
		}
		return changeNth(v.Elem(), n, path)
	case reflect.Slice:
		if try(func() { v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem()))) }) {
			return path + " one longer", true
		}
		if v.Len() > 0 && try(func() { v.Set(v.Slice(0, v.Len()-1)) }) {
			return path + " one shorter", true
		}
		for i := range v.Len() {
			if what, ok := changeNth(v.Index(i), n, fmt.Sprintf("%s[%d]", path, i)); ok {
				return what, true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if what, ok := changeNth(v.Field(i), n, path+"."+v.Type().Field(i).Name); ok {
				return what, true
			}
		}
	default:
		panic(fmt.Sprintf("%s: changeNth does not change a %s", path, v.Kind()))
	}
	return "", false
}

// What sharing costs the store's live copy of a pod, against the copy.
func BenchmarkShareReadOnly(b *testing.B) {
	p := labPod("web-7dc4b47f4d-x2k9p")
	b.Run("clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Clone(p)
		}
	})
	b.Run("clone+share", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ShareReadOnly(Clone(p))
		}
	})
}

// Pods with equal managedFields share one list; a pod whose entries
// differ in any one field keeps its own (each field is changed in turn);
// what the pods say does not change.
func TestShareReadOnlyManagedFields(t *testing.T) {
	entries := func() []ManagedFieldsEntry {
		at := NewTime(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
		return []ManagedFieldsEntry{{Manager: "kubectl-create", Operation: "Update", APIVersion: "v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: []byte(`{"f:spec":{"f:containers":{}}}`)}}
	}
	withFields := func(name string, change func(*ManagedFieldsEntry)) *Pod {
		p := labPod(name)
		p.ManagedFields = entries()
		change(&p.ManagedFields[0])
		return p
	}
	share := func(p *Pod) {
		t.Helper()
		before, _ := json.Marshal(p)
		ShareReadOnly(p)
		if after, _ := json.Marshal(p); string(after) != string(before) {
			t.Fatalf("pod %s changed:\n%s\n%s", p.Name, before, after)
		}
	}
	same := func(*ManagedFieldsEntry) {}
	a, b := withFields("a", same), withFields("b", same)
	share(a)
	share(b)
	if &a.ManagedFields[0] != &b.ManagedFields[0] {
		t.Error("two pods with equal managedFields hold a list each, want one shared")
	}
	later := NewTime(time.Date(2026, 12, 6, 9, 0, 1, 0, time.UTC))
	for field, change := range map[string]func(*ManagedFieldsEntry){
		"manager":     func(e *ManagedFieldsEntry) { e.Manager = "kubectl" },
		"operation":   func(e *ManagedFieldsEntry) { e.Operation = "Apply" },
		"apiVersion":  func(e *ManagedFieldsEntry) { e.APIVersion = "v2" },
		"time":        func(e *ManagedFieldsEntry) { e.Time = &later },
		"no time":     func(e *ManagedFieldsEntry) { e.Time = nil },
		"fieldsType":  func(e *ManagedFieldsEntry) { e.FieldsType = "FieldsV2" },
		"fieldsV1":    func(e *ManagedFieldsEntry) { e.FieldsV1 = []byte(`{"f:spec":{}}`) },
		"subresource": func(e *ManagedFieldsEntry) { e.Subresource = "status" },
	} {
		p := withFields("other-"+field, change)
		share(p)
		if &p.ManagedFields[0] == &a.ManagedFields[0] {
			t.Errorf("a pod whose entry differs in %s got the shared list", field)
		}
	}
}
