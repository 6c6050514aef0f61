package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// A teacher's session with the skiff CLI alone: a student's kubeconfig
// (a certificate through the CSR API, the namespace as its default), a
// RoleBinding made with `create rolebinding`, `auth can-i` as the student
// and as the teacher impersonating them, and Kubernetes' refusal.
func TestStudentKubeconfigAndRBACVerbs(t *testing.T) {
	_, admin := startTestControlPlane(t, t.TempDir())
	must := func(args ...string) string {
		t.Helper()
		res := runCLI(t, args...)
		if res.code != 0 {
			t.Fatalf("skiff %s: code %d\n%s%s", strings.Join(args, " "), res.code, res.out, res.err)
		}
		return res.out
	}
	must("create", "namespace", "alice", "--kubeconfig", admin)
	res := runCLI(t, "kubeconfig", "--user", "alice", "--group", "students", "-n", "alice", "--expiration", "24h", "--kubeconfig", admin)
	if res.code != 0 || !strings.Contains(res.out, "client-certificate-data") || !strings.Contains(res.out, "namespace: alice") || !strings.Contains(res.out, "current-context: alice@skiff") {
		t.Fatalf("kubeconfig --user: code %d\n%s%s", res.code, res.out, res.err)
	}
	alice := filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(alice, []byte(res.out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := must("auth", "whoami", "--kubeconfig", alice); !strings.Contains(out, "alice") || !strings.Contains(out, "[students system:authenticated]") {
		t.Fatalf("whoami:\n%s", out)
	}
	if out := must("get", "csr", "--kubeconfig", admin); !strings.Contains(out, "Approved,Issued") || !strings.Contains(out, "kubernetes.io/kube-apiserver-client") {
		t.Fatalf("get csr:\n%s", out)
	}
	res = runCLI(t, "get", "pods", "--kubeconfig", alice) // her context's namespace
	if want := `Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "alice"`; res.code == 0 || !strings.Contains(res.err, want) {
		t.Fatalf("get pods before a binding: code %d, err %q, want %q", res.code, res.err, want)
	}
	must("create", "rolebinding", "alice-edit", "--clusterrole", "edit", "--user", "alice", "-n", "alice", "--kubeconfig", admin)
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		res := runCLI(t, "auth", "can-i", "create", "pods", "--kubeconfig", alice)
		return res.code == 0 && res.out == "yes\n", res.out + res.err
	})
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"auth", "can-i", "create", "deployments", "--kubeconfig", alice}, "yes\n", 0},
		{[]string{"auth", "can-i", "update", "pods", "--subresource", "status", "--kubeconfig", alice}, "no\n", 1},
		{[]string{"auth", "can-i", "list", "pods", "-n", "default", "--kubeconfig", alice}, "no\n", 1},
		{[]string{"auth", "can-i", "list", "pods", "-n", "alice", "--as", "alice", "--kubeconfig", admin}, "yes\n", 0},
		{[]string{"auth", "can-i", "list", "pods", "-n", "default", "--as", "alice", "--kubeconfig", admin}, "no\n", 1},
	} {
		if res := runCLI(t, tc.args...); res.out != tc.want || res.code != tc.code {
			t.Errorf("skiff %s: %q (code %d), want %q (code %d)\n%s", strings.Join(tc.args, " "), res.out, res.code, tc.want, tc.code, res.err)
		}
	}
	if out := must("auth", "can-i", "--list", "--kubeconfig", alice); !strings.Contains(out, "deployments.apps") || !strings.Contains(out, "Resources") {
		t.Fatalf("can-i --list:\n%s", out)
	}
	// The real kubectl prints the same tables from the same answers.
	kubectl := kubectltest.Binary(t)
	for _, args := range [][]string{
		{"auth", "can-i", "--list", "--kubeconfig", alice},
		{"auth", "can-i", "--list", "-n", "default", "--kubeconfig", alice},
		{"auth", "can-i", "--list", "--no-headers", "--kubeconfig", admin},
		{"auth", "can-i", "--list", "-n", "alice", "--as", "alice", "--as-group", "students", "--kubeconfig", admin},
		{"auth", "whoami", "--kubeconfig", alice},
		{"auth", "whoami", "--as", "bob", "--as-group", "students", "--kubeconfig", admin},
	} {
		want, err := exec.Command(kubectl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, want)
		}
		if got := must(args...); got != string(want) {
			t.Errorf("skiff %s:\n%s\nkubectl prints:\n%s", strings.Join(args, " "), got, want)
		}
	}
	// edit holds no RBAC writes: her own role is refused.
	res = runCLI(t, "create", "role", "reader", "--verb", "get,list", "--resource", "pods", "--kubeconfig", alice)
	if want := `roles.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "alice"`; res.code == 0 || !strings.Contains(res.err, want) {
		t.Fatalf("create role as an editor: code %d %q, want %q", res.code, res.err, want)
	}
	if out := must("create", "role", "reader", "--verb", "get,list", "--resource", "pods,deployments.apps", "-n", "alice", "--kubeconfig", admin); out != "role.rbac.authorization.k8s.io/reader created\n" {
		t.Fatalf("create role: %q", out)
	}
	if out := must("get", "role", "reader", "-n", "alice", "-o", "yaml", "--kubeconfig", admin); !strings.Contains(out, "- apps") || !strings.Contains(out, "- deployments") {
		t.Fatalf("the role as kubectl builds it (one rule per group):\n%s", out)
	}
	if out := must("get", "rolebindings", "-n", "alice", "-o", "wide", "--kubeconfig", admin); !strings.Contains(out, "ClusterRole/edit") || !strings.Contains(out, "alice") {
		t.Fatalf("get rolebindings -o wide:\n%s", out)
	}
	// The signer refuses what admission lets through but is reserved,
	// and admission refuses system:masters.
	res = runCLI(t, "kubeconfig", "--user", "eve", "--group", "system:masters", "--kubeconfig", admin)
	if want := `use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`; res.code == 0 || !strings.Contains(res.err, want) {
		t.Fatalf("kubeconfig --user eve --group system:masters: code %d %q, want %q", res.code, res.err, want)
	}
}
