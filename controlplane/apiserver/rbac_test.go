package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

// bindRole binds a Role or ClusterRole to subject in namespace ns ("": a
// ClusterRoleBinding), as the admin.
func bindRole(t *testing.T, e *env, ns, name, kind, role string, subjects ...api.Subject) {
	t.Helper()
	ref := api.RoleRef{APIGroup: api.RBACGroup, Kind: kind, Name: role}
	if ns != "" {
		if _, err := e.local.Create(context.Background(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil && !api.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	var obj api.Object
	if ns == "" {
		obj = &api.ClusterRoleBinding{ObjectMeta: api.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
	} else {
		obj = &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subjects}
	}
	if _, err := e.local.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitAllowed waits until every server's RBAC cache allows a (the binding
// just made has reached it).
func waitAllowed(t *testing.T, e *env, a attributes) {
	t.Helper()
	// Every server over the registry has RBAC caches of its own: a
	// tlsEnv's second server answers the HTTPS requests, and the registry
	// asks it in escalation checks (setAuthorizer).
	servers := []*Server{e.srv}
	if s := e.reg.authorizer.Load(); s != nil && s != e.srv {
		servers = append(servers, s)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		for i, s := range servers {
			if ok, reason, err := s.authorize(context.Background(), a); !ok {
				return false, fmt.Sprintf("not allowed yet by server %d of %d: %q %v", i+1, len(servers), reason, err)
			}
		}
		return true, ""
	})
}

func user(name string, groups ...string) User {
	return User{Name: name, Groups: append(groups, AuthenticatedGroup)}
}

func subjectUser(name string) api.Subject {
	return api.Subject{Kind: api.SubjectUser, APIGroup: api.RBACGroup, Name: name}
}

// The default roles say what Kubernetes' say: edit writes a namespace's
// workloads but no status, no binding, no RBAC and no Workloads; view
// reads no Secrets; Kueue's batch user writes Jobs and reads Workloads.
func TestDefaultRoles(t *testing.T) {
	e := newEnv(t)
	editor, viewer, admin, batch := user("ed"), user("vi"), user("ad"), user("bu")
	bindRole(t, e, "lab", "ed", "ClusterRole", "edit", subjectUser("ed"))
	bindRole(t, e, "lab", "vi", "ClusterRole", "view", subjectUser("vi"))
	bindRole(t, e, "lab", "ad", "ClusterRole", "admin", subjectUser("ad"))
	bindRole(t, e, "lab", "bu", "ClusterRole", "kueue-batch-user-role", subjectUser("bu"))
	waitAllowed(t, e, res(batch, "create", "batch", "jobs", "", "lab", ""))
	for _, tc := range []struct {
		name  string
		a     attributes
		allow bool
	}{
		{"edit creates pods", res(editor, "create", "", "pods", "", "lab", ""), true},
		{"edit creates deployments", res(editor, "create", "apps", "deployments", "", "lab", ""), true},
		{"edit scales deployments", res(editor, "update", "apps", "deployments", "scale", "lab", "web"), true},
		{"edit creates jobs", res(editor, "create", "batch", "jobs", "", "lab", ""), true},
		{"edit execs", res(editor, "create", "", "pods", "exec", "lab", "p"), true},
		{"edit reads logs", res(editor, "get", "", "pods", "log", "lab", "p"), true},
		{"edit reads and writes secrets", res(editor, "create", "", "secrets", "", "lab", ""), true},
		{"edit creates resource claims", res(editor, "create", "resource.k8s.io", "resourceclaims", "", "lab", ""), true},
		{"edit reads localqueues", res(editor, "list", "kueue.x-k8s.io", "localqueues", "", "lab", ""), true},
		{"edit cannot write pod status", res(editor, "update", "", "pods", "status", "lab", "p"), false},
		{"edit cannot bind pods", res(editor, "create", "", "pods", "binding", "lab", "p"), false},
		{"edit cannot write workloads", res(editor, "update", "kueue.x-k8s.io", "workloads", "", "lab", "w"), false},
		{"edit cannot write workload status", res(editor, "update", "kueue.x-k8s.io", "workloads", "status", "lab", "w"), false},
		{"edit cannot create rolebindings", res(editor, "create", api.RBACGroup, "rolebindings", "", "lab", ""), false},
		{"edit cannot write resourcequotas", res(editor, "create", "", "resourcequotas", "", "lab", ""), false},
		{"edit cannot touch another namespace", res(editor, "list", "", "pods", "", "other", ""), false},
		{"edit cannot list nodes", res(editor, "list", "", "nodes", "", "", ""), false},
		{"view lists pods", res(viewer, "list", "", "pods", "", "lab", ""), true},
		{"view reads pod logs", res(viewer, "get", "", "pods", "log", "lab", "p"), true},
		{"view reads no secrets", res(viewer, "get", "", "secrets", "", "lab", "s"), false},
		{"view creates nothing", res(viewer, "create", "", "pods", "", "lab", ""), false},
		{"view reads metrics (kubectl top)", res(viewer, "list", "metrics.k8s.io", "pods", "", "lab", ""), true},
		{"admin creates rolebindings", res(admin, "create", api.RBACGroup, "rolebindings", "", "lab", ""), true},
		{"admin cannot write pod status either", res(admin, "update", "", "pods", "status", "lab", "p"), false},
		{"batch user creates jobs", res(batch, "create", "batch", "jobs", "", "lab", ""), true},
		{"batch user reads workloads", res(batch, "get", "kueue.x-k8s.io", "workloads", "", "lab", "w"), true},
		{"batch user cannot update workloads", res(batch, "update", "kueue.x-k8s.io", "workloads", "", "lab", "w"), false},
		{"batch user cannot update workload status", res(batch, "update", "kueue.x-k8s.io", "workloads", "status", "lab", "w"), false},
		{"batch user reads pending workloads", res(batch, "get", "visibility.kueue.x-k8s.io", "localqueues", "pendingworkloads", "lab", "q"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, err := e.srv.authorize(context.Background(), tc.a)
			if err != nil || ok != tc.allow {
				t.Fatalf("allowed %v (%q, %v), want %v", ok, reason, err, tc.allow)
			}
		})
	}
}

// Over HTTPS with client certificates, as students reach the server: the
// refusal is Kubernetes' sentence; a binding to a missing role says so.
func TestRBACForbiddenWords(t *testing.T) {
	e := newTLSEnv(t)
	for _, ns := range []string{"alice", "bob"} {
		if _, err := e.local.Create(context.Background(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	bindRole(t, e.env, "alice", "alice-edit", "ClusterRole", "edit", subjectUser("alice"))
	bindRole(t, e.env, "bob", "gone", "Role", "pod-reader", subjectUser("alice"))
	alice := e.client(t, "alice", "students")
	waitAllowed(t, e.env, res(user("alice", "students"), "list", "", "pods", "", "alice", ""))
	get := func(path string) (int, api.Status) {
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		resp, err := alice.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st api.Status
		if resp.StatusCode != http.StatusOK {
			st = decodeStatus(t, resp)
		}
		return resp.StatusCode, st
	}
	if code, st := get("/api/v1/namespaces/alice/pods"); code != http.StatusOK {
		t.Fatalf("alice lists her pods: %d %s", code, st.Message)
	}
	code, st := get("/api/v1/namespaces/bob/pods")
	want := `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "bob": RBAC: role.rbac.authorization.k8s.io "pod-reader" not found`
	if code != http.StatusForbidden || st.Message != want || st.Reason != api.ReasonForbidden {
		t.Fatalf("alice lists bob's pods: %d %q\nwant 403 %q", code, st.Message, want)
	}
	code, st = get("/api/v1/nodes")
	if want := `nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope`; code != http.StatusForbidden || st.Message != want {
		t.Fatalf("alice lists nodes: %d %q\nwant 403 %q", code, st.Message, want)
	}
}

// No one grants what they lack: an admin of a namespace makes roles and
// bindings of what admin holds there, not more, unless bound to escalate
// or bind.
func TestRBACEscalation(t *testing.T) {
	e := newTLSEnv(t)
	if _, err := e.local.Create(context.Background(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "alice"}}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, e.env, "alice", "alice-admin", "ClusterRole", "admin", subjectUser("alice"))
	alice := e.client(t, "alice", "students")
	waitAllowed(t, e.env, res(user("alice", "students"), "create", api.RBACGroup, "roles", "", "alice", ""))
	post := func(path, body string) (int, string) {
		code, b := e.post(t, alice, "", path, body)
		if code == http.StatusCreated {
			return code, ""
		}
		return code, decode[api.Status](t, b).Message
	}
	roles := "/apis/rbac.authorization.k8s.io/v1/namespaces/alice/roles"
	bindings := "/apis/rbac.authorization.k8s.io/v1/namespaces/alice/rolebindings"
	if code, msg := post(roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"pod-reader"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]}`); code != http.StatusCreated {
		t.Fatalf("a role within admin's rights: %d %s", code, msg)
	}
	code, msg := post(roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"status-writer"},"rules":[{"apiGroups":[""],"resources":["pods/status"],"verbs":["update","patch"]}]}`)
	want := `roles.rbac.authorization.k8s.io "status-writer" is forbidden: user "alice" (groups=["students" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" +
		`{APIGroups:[""], Resources:["pods/status"], Verbs:["update" "patch"]}`
	if code != http.StatusForbidden || msg != want {
		t.Fatalf("a role beyond admin's rights: %d %q\nwant 403 %q", code, msg, want)
	}
	binding := func(name, kind, role string) string {
		return fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":%q},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":%q,"name":%q},"subjects":[{"kind":"User","name":"bob","apiGroup":"rbac.authorization.k8s.io"}]}`, name, kind, role)
	}
	if code, msg := post(bindings, binding("bob-view", "ClusterRole", "view")); code != http.StatusCreated {
		t.Fatalf("binding view (within admin): %d %s", code, msg)
	}
	if code, msg := post(bindings, binding("bob-reader", "Role", "pod-reader")); code != http.StatusCreated {
		t.Fatalf("binding her own role: %d %s", code, msg)
	}
	code, msg = post(bindings, binding("bob-root", "ClusterRole", "cluster-admin"))
	if code != http.StatusForbidden || !strings.Contains(msg, `rolebindings.rbac.authorization.k8s.io "bob-root" is forbidden: user "alice" (groups=["students" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) {
		t.Fatalf("binding cluster-admin: %d %q", code, msg)
	}
	// The bind verb on that role is enough.
	if _, err := e.local.Create(context.Background(), &api.Role{ObjectMeta: api.ObjectMeta{Name: "binder", Namespace: "alice"},
		Rules: []api.PolicyRule{{Verbs: []string{"bind"}, APIGroups: []string{api.RBACGroup}, Resources: []string{"clusterroles"}, ResourceNames: []string{"cluster-admin"}}}}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, e.env, "alice", "alice-binder", "Role", "binder", subjectUser("alice"))
	waitAllowed(t, e.env, res(user("alice", "students"), "bind", api.RBACGroup, "clusterroles", "", "alice", "cluster-admin"))
	if code, msg := post(bindings, binding("bob-root", "ClusterRole", "cluster-admin")); code != http.StatusCreated {
		t.Fatalf("binding cluster-admin with bind on it: %d %s", code, msg)
	}
}

// kubectl --as: the teacher impersonates a student; a student may not.
func TestImpersonation(t *testing.T) {
	e := newTLSEnv(t)
	bindRole(t, e.env, "alice", "alice-edit", "ClusterRole", "edit", subjectUser("alice"))
	waitAllowed(t, e.env, res(user("alice"), "list", "", "pods", "", "alice", ""))
	do := func(c *http.Client, token, path string, headers map[string][]string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, vs := range headers {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, ""
		}
		return resp.StatusCode, decodeStatus(t, resp).Message
	}
	admin := e.client(t, "")
	asAlice := map[string][]string{"Impersonate-User": {"alice"}}
	if code, msg := do(admin, testToken, "/api/v1/namespaces/alice/pods", asAlice); code != http.StatusOK {
		t.Fatalf("admin as alice in alice: %d %s", code, msg)
	}
	code, msg := do(admin, testToken, "/api/v1/namespaces/bob/pods", asAlice)
	if want := `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "bob"`; code != http.StatusForbidden || msg != want {
		t.Fatalf("admin as alice in bob: %d %q, want %q", code, msg, want)
	}
	code, msg = do(admin, testToken, "/api/v1/namespaces/alice/pods", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Group": {"system:masters"}})
	if code != http.StatusOK {
		t.Fatalf("admin as alice in system:masters: %d %s", code, msg)
	}
	bob := e.client(t, "bob")
	code, msg = do(bob, "", "/api/v1/namespaces/alice/pods", asAlice)
	if want := `users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`; code != http.StatusForbidden || msg != want {
		t.Fatalf("bob as alice: %d %q, want %q", code, msg, want)
	}
	code, msg = do(e.client(t, "alice"), "", "/api/v1/namespaces/alice/pods", map[string][]string{"Impersonate-User": {"alice"}, "Impersonate-Group": {"system:masters"}})
	if want := `users "alice" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`; code != http.StatusForbidden || msg != want {
		t.Fatalf("alice as herself in system:masters: %d %q, want %q", code, msg, want)
	}
}

func decodeStatus(t *testing.T, resp *http.Response) api.Status {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return *decode[api.Status](t, b)
}
