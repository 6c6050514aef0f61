package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
)

// A lab room of students, on real containerd with the real kubectl: the
// teacher's admin kubeconfig, one node that runs as a node (its own
// certificate, so the Node authorizer and RBAC see what an agent does),
// and a kubeconfig per student from `skiff kubeconfig --user`. Tests of
// the lab room (RBAC here; s2's quotas) share it: classroom(t) starts it,
// room.student(t, name) makes a student with edit in their namespace.
type classroom struct {
	cp       *controlplane.ControlPlane
	admin    *kubectltest.Cluster
	c        client.Interface
	nodeLog  *lockedBuffer
	serverLg *lockedBuffer
}

func newClassroom(t *testing.T) *classroom {
	t.Helper()
	e := newCtrdEnv(t)
	room := &classroom{nodeLog: &lockedBuffer{}, serverLg: &lockedBuffer{}}
	room.cp, room.c = startControlPlane(t, func(cfg *controlplane.Config) {
		cfg.Log = slog.New(slog.NewTextHandler(room.serverLg, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	cc := room.cp.ClientConfig()
	room.admin = kubectltest.Use(t, cc.Server, cc.CAData, cc.Token)

	// The node, with a node's credentials, as `skiff agent` runs.
	nc := nodeCredentials(t, room.cp, "lab-1", "127.0.0.1")
	cfg := testNodeConfig(e.runtime(t), "lab-1", t.TempDir(), nil)
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", nc
	cfg.Log = slog.New(slog.NewTextHandler(room.nodeLog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nodeClient, err := client.New(client.Config{Server: cc.Server, CAData: nc.CA, CertData: nc.ClientCert, KeyData: nc.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), cfg, nodeClient)
	if err != nil {
		t.Fatal(err)
	}
	ra := &runningAgent{name: cfg.Name, node: n}
	t.Cleanup(func() { ra.kill(t) })
	if err := n.WaitReady(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return room
}

// skiff runs the skiff CLI in process with args.
func (room *classroom) skiff(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cli.Main(ctx, append([]string{"--kubeconfig", room.admin.Kubeconfig}, args...), &out, &errb)
	return out.String(), errorsWith(err, errb.String())
}

func errorsWith(err error, stderr string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", err, stderr)
}

// student makes a namespace named after the student, their kubeconfig
// (`skiff kubeconfig --user NAME --group students -n NAME`) and, with the
// teacher's kubectl, a RoleBinding of edit there; it returns the
// student's kubectl.
func (room *classroom) student(t *testing.T, name string) *kubectltest.Cluster {
	t.Helper()
	room.admin.Must(t, "", "create", "namespace", name)
	out, err := room.skiff(t, "kubeconfig", "--user", name, "--group", "students", "-n", name)
	if err != nil {
		t.Fatalf("skiff kubeconfig --user %s: %v", name, err)
	}
	kc := *room.admin
	kc.Kubeconfig = filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(kc.Kubeconfig, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	room.admin.Must(t, "", "create", "rolebinding", name+"-edit", "--clusterrole=edit", "--user="+name, "-n", name)
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		r := kc.Run(t, "", "auth", "can-i", "create", "pods")
		return r.Err == nil && r.Stdout == "yes\n", r.Stdout + r.Stderr
	})
	return &kc
}

const studentPod = `apiVersion: v1
kind: Pod
metadata:
  name: work
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo hello from $(hostname); sleep 3600"]
`

// TestClassroomAliceAndBob: each student works in their namespace with
// the real kubectl, is refused in the other's in Kubernetes' words (get,
// create, describe, logs, exec), and the upstream RBAC examples of the
// Kubernetes docs apply unchanged and behave. No Forbidden in the node's
// log: what an agent does is covered by the Node authorizer.
func TestClassroomAliceAndBob(t *testing.T) {
	room := newClassroom(t)
	alice, bob := room.student(t, "alice"), room.student(t, "bob")
	for _, s := range []struct {
		name string
		kc   *kubectltest.Cluster
	}{{"alice", alice}, {"bob", bob}} {
		s.kc.Must(t, studentPod, "apply", "-f", "-")
		testwait.Until(t, 60*time.Second, func() (bool, string) {
			r := s.kc.Run(t, "", "get", "pod", "work", "-o", "jsonpath={.status.phase}")
			return r.Stdout == "Running", r.Stdout + r.Stderr
		})
		if out := s.kc.Must(t, "", "get", "pods"); !strings.Contains(out, "work") {
			t.Errorf("%s's get pods:\n%s", s.name, out)
		}
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			r := s.kc.Run(t, "", "logs", "work")
			return strings.Contains(r.Stdout, "hello from work"), r.Stdout + r.Stderr
		})
	}
	for _, tc := range []struct {
		kc   *kubectltest.Cluster
		args []string
		want string
	}{
		{alice, []string{"get", "pods", "-n", "bob"}, `Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "bob"`},
		{bob, []string{"get", "pods", "-n", "alice"}, `Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "alice"`},
		{alice, []string{"get", "pod", "work", "-n", "bob"}, `Error from server (Forbidden): pods "work" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "bob"`},
		{alice, []string{"describe", "pod", "work", "-n", "bob"}, `Error from server (Forbidden): pods "work" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "bob"`},
		{alice, []string{"logs", "work", "-n", "bob"}, `Error from server (Forbidden): pods "work" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "bob"`},
		{alice, []string{"delete", "pod", "work", "-n", "bob"}, `Error from server (Forbidden): pods "work" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "bob"`},
		{alice, []string{"get", "secrets", "-A"}, `Error from server (Forbidden): secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" at the cluster scope`},
		{alice, []string{"create", "rolebinding", "x", "--clusterrole=admin", "--user=alice"}, `error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "alice"`},
	} {
		r := tc.kc.Run(t, "", tc.args...)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("kubectl %s: %v\n%s%s\nwant %q", strings.Join(tc.args, " "), r.Err, r.Stdout, r.Stderr, tc.want)
		}
	}
	if out := alice.Run(t, "", "auth", "can-i", "create", "pods", "-n", "bob").Stdout; out != "no\n" {
		t.Errorf("alice can-i create pods -n bob: %q", out)
	}
	if r := room.admin.Run(t, "", "auth", "can-i", "list", "pods", "-n", "alice", "--as", "bob"); r.Stdout != "no\n" || r.Err == nil {
		t.Errorf("the teacher as bob, can-i list pods -n alice: %q %v", r.Stdout, r.Err)
	}
	if r := room.admin.Run(t, "", "auth", "can-i", "list", "pods", "-n", "bob", "--as", "bob"); r.Stdout != "yes\n" || r.Err != nil {
		t.Errorf("the teacher as bob, can-i list pods -n bob: %q %v", r.Stdout, r.Err)
	}

	// The Kubernetes docs' examples, unchanged: jane reads the pods of
	// default and nothing else; "monitoring" gets the rules of the
	// ClusterRoles labelled to aggregate into it, "view" those labelled
	// aggregate-to-view.
	room.admin.Must(t, "", "apply", "-f", "../examples/rbac/pod-reader.yaml")
	room.admin.Must(t, "", "apply", "-f", "../examples/rbac/aggregated-monitoring.yaml")
	if _, err := room.c.Create(context.Background(), &api.Pod{ObjectMeta: api.ObjectMeta{Name: "pub", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}}}); err != nil {
		t.Fatal(err)
	}
	out, err := room.skiff(t, "kubeconfig", "--user", "jane")
	if err != nil {
		t.Fatal(err)
	}
	jane := *room.admin
	jane.Kubeconfig = filepath.Join(t.TempDir(), "jane.kubeconfig")
	if err := os.WriteFile(jane.Kubeconfig, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		r := jane.Run(t, "", "get", "pods", "-n", "default", "-o", "name")
		return r.Err == nil && strings.Contains(r.Stdout, "pod/pub"), r.Stdout + r.Stderr
	})
	for _, args := range [][]string{{"delete", "pod", "pub", "-n", "default"}, {"get", "pods", "-n", "alice"}, {"get", "configmaps", "-n", "default"}} {
		if r := jane.Run(t, "", args...); r.Err == nil || !strings.Contains(r.Stderr, `is forbidden: User "jane" cannot`) {
			t.Errorf("jane: kubectl %s: %v %s%s, want Forbidden", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
		}
	}
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		mon := room.admin.Run(t, "", "get", "clusterrole", "monitoring", "-o", "jsonpath={.rules}").Stdout
		view := room.admin.Run(t, "", "get", "clusterrole", "view", "-o", "jsonpath={.rules}").Stdout
		return strings.Contains(mon, "endpointslices") && strings.Contains(view, "crontabs"), "monitoring: " + mon + "\nview: " + view
	})
	if log := room.nodeLog.String(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the node's log has a Forbidden:\n%s", log)
	}
}
