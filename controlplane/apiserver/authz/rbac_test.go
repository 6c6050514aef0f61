package authz

import (
	"fmt"
	"os"
	"testing"

	"skiff.dev/skiff/api"
)

// room is an index of a lab room: the default roles (aggregated as the
// controller would), and n students, each bound to edit in their own
// namespace; extra ClusterRoles join the defaults before aggregation.
func room(tb testing.TB, n int, extra ...*api.ClusterRole) *Index {
	tb.Helper()
	roles := append(DefaultClusterRoles(), extra...)
	for range 3 { // view → edit → admin
		for _, r := range roles {
			if rules, ok, err := AggregatedRules(r, roles); err != nil {
				tb.Fatal(err)
			} else if ok {
				r.Rules = rules
			}
		}
	}
	var bindings []*api.RoleBinding
	for i := range n {
		s := fmt.Sprintf("student-%d", i)
		bindings = append(bindings, &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: s + "-edit", Namespace: s},
			RoleRef: api.RoleRef{APIGroup: api.RBACGroup, Kind: "ClusterRole", Name: "edit"}, Subjects: []api.Subject{{Kind: api.SubjectUser, Name: s}}})
	}
	return NewIndex(nil, roles, bindings, DefaultClusterRoleBindings())
}

func TestRuleAllows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  api.PolicyRule
		a     Attributes
		allow bool
	}{
		{"exact", api.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, Attributes{ResourceRequest: true, Verb: "get", Resource: "pods"}, true},
		{"another verb", api.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, Attributes{ResourceRequest: true, Verb: "list", Resource: "pods"}, false},
		{"another group", api.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"deployments"}}, Attributes{ResourceRequest: true, Verb: "get", APIGroup: "apps", Resource: "deployments"}, false},
		{"a subresource is not its resource", api.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"pods"}}, Attributes{ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status"}, false},
		{"RESOURCE/SUB", api.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"pods/status"}}, Attributes{ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status"}, true},
		{"*/SUB", api.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, Attributes{ResourceRequest: true, Verb: "get", APIGroup: "apps", Resource: "deployments", Subresource: "scale"}, true},
		{"* covers subresources", api.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, Attributes{ResourceRequest: true, Verb: "create", Resource: "pods", Subresource: "binding"}, true},
		{"resourceNames", api.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, Attributes{ResourceRequest: true, Verb: "get", Resource: "configmaps", Name: "b"}, false},
		{"resourceNames and a list (no name)", api.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}, Attributes{ResourceRequest: true, Verb: "list", Resource: "configmaps"}, false},
		{"a URL prefix", api.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}, Attributes{Verb: "get", Path: "/healthz/etcd"}, true},
		{"a URL rule is no resource rule", api.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}}, Attributes{ResourceRequest: true, Verb: "get", Resource: "pods"}, false},
	} {
		if got := RuleAllows(tc.a, &tc.rule); got != tc.allow {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.allow)
		}
	}
}

// A binding's service account subject without a namespace is the
// binding's namespace's; a missing role grants nothing and says so.
func TestIndexSubjects(t *testing.T) {
	ix := NewIndex([]*api.Role{{ObjectMeta: api.ObjectMeta{Name: "r", Namespace: "team"}, Rules: []api.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}},
		nil, []*api.RoleBinding{
			{ObjectMeta: api.ObjectMeta{Name: "b", Namespace: "team"}, RoleRef: api.RoleRef{Kind: "Role", Name: "r"}, Subjects: []api.Subject{{Kind: api.SubjectServiceAccount, Name: "default"}}},
			{ObjectMeta: api.ObjectMeta{Name: "gone", Namespace: "team"}, RoleRef: api.RoleRef{Kind: "Role", Name: "missing"}, Subjects: []api.Subject{{Kind: api.SubjectGroup, Name: "students"}}},
		}, nil)
	sa := User{Name: "system:serviceaccount:team:default"}
	if ok, reason := ix.Authorize(Attributes{User: sa, ResourceRequest: true, Verb: "list", Resource: "pods", Namespace: "team"}); !ok ||
		reason != `RBAC: allowed by RoleBinding "b" of Role "r" to ServiceAccount "system:serviceaccount:team:default"` {
		t.Errorf("the service account at home: %v %q", ok, reason)
	}
	if ok, _ := ix.Authorize(Attributes{User: sa, ResourceRequest: true, Verb: "list", Resource: "pods", Namespace: "other"}); ok {
		t.Error("the service account elsewhere allowed")
	}
	ok, reason := ix.Authorize(Attributes{User: User{Name: "alice", Groups: []string{"students"}}, ResourceRequest: true, Verb: "list", Resource: "pods", Namespace: "team"})
	if ok || reason != `RBAC: role.rbac.authorization.k8s.io "missing" not found` {
		t.Errorf("a binding to a missing role: %v %q", ok, reason)
	}
}

// No one grants what they lack: the refusal lists what is missing, in
// Kubernetes' form.
func TestConfirmNoEscalation(t *testing.T) {
	owner := []api.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
	err := ConfirmNoEscalation(User{Name: "alice", Groups: []string{"students"}}, owner, nil,
		[]api.PolicyRule{{Verbs: []string{"get", "delete"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets"}}})
	want := "user \"alice\" (groups=[\"students\"]) is attempting to grant RBAC permissions not currently held:\n" +
		"{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if err := ConfirmNoEscalation(User{Name: "alice"}, owner, nil, []api.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}); err != nil {
		t.Fatal(err)
	}
}

// The default roles as the room sees them.
func TestDefaultsInTheRoom(t *testing.T) {
	ix := room(t, 40)
	s := User{Name: "student-7", Groups: []string{"students", "system:authenticated"}}
	for _, tc := range []struct {
		a     Attributes
		allow bool
	}{
		{Attributes{User: s, ResourceRequest: true, Verb: "create", Resource: "pods", Namespace: "student-7"}, true},
		{Attributes{User: s, ResourceRequest: true, Verb: "create", Resource: "pods", Namespace: "student-8"}, false},
		{Attributes{User: s, ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "student-7"}, false},
		{Attributes{User: s, Verb: "get", Path: "/apis/apps/v1"}, true},
		// As Kubernetes: edit adds no ephemeral containers (kubectl debug).
		{Attributes{User: s, ResourceRequest: true, Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers", Namespace: "student-7"}, false},
	} {
		if ok, reason := ix.Authorize(tc.a); ok != tc.allow {
			t.Errorf("%+v: %v %q, want %v", tc.a, ok, reason, tc.allow)
		}
	}
}

// examples/rbac/debug-for-edit.yaml, as a teacher applies it, gives edit
// (so each student in their own namespace) kubectl debug, and nothing else.
func TestDebugForEditExample(t *testing.T) {
	data, err := os.ReadFile("../../../examples/rbac/debug-for-edit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := api.DecodeStream(data)
	if len(docs) != 1 || docs[0].Err != nil {
		t.Fatalf("decode: %+v", docs)
	}
	role, ok := docs[0].Object.(*api.ClusterRole)
	if !ok {
		t.Fatalf("decoded %T, want a ClusterRole", docs[0].Object)
	}
	ix := room(t, 2, role)
	s := User{Name: "student-1", Groups: []string{"system:authenticated"}}
	debug := func(ns string) Attributes {
		return Attributes{User: s, ResourceRequest: true, Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers", Namespace: ns}
	}
	for _, tc := range []struct {
		a     Attributes
		allow bool
	}{
		{debug("student-1"), true},
		{debug("student-0"), false},
		{Attributes{User: s, ResourceRequest: true, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "student-1"}, false},
	} {
		if ok, reason := ix.Authorize(tc.a); ok != tc.allow {
			t.Errorf("%+v: %v %q, want %v", tc.a, ok, reason, tc.allow)
		}
	}
}

// What RBAC costs per request in a room of 40 students: the index lookup
// and the rule walk of a student creating a pod in their namespace (the
// common write) and of a refused one.
func BenchmarkAuthorize(b *testing.B) {
	ix := room(b, 40)
	s := User{Name: "student-7", Groups: []string{"students", "system:authenticated"}}
	allowed := Attributes{User: s, ResourceRequest: true, Verb: "create", Resource: "pods", Namespace: "student-7"}
	refused := Attributes{User: s, ResourceRequest: true, Verb: "create", Resource: "pods", Namespace: "student-8"}
	b.Run("allowed", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := ix.Authorize(allowed); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := ix.Authorize(refused); ok {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("rebuild", func(b *testing.B) {
		for b.Loop() {
			room(b, 40)
		}
	})
}
