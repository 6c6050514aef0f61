package apiserver

import (
	"context"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/kubectltest"
)

// kubectl debug against skiff: the real kubectl's strategic merge patch
// of pods/NAME/ephemeralcontainers adds the container, kubectl describe
// shows it under "Ephemeral Containers:", and Kubernetes' rules and words
// hold (names unique among all containers, none on create, a plain
// update may not change them, a missing pod is the pod's NotFound).
func TestKubectlDebug(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := e.local.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	// skiff's namespaces are at Pod Security baseline: kubectl's general
	// profile (SYS_PTRACE) is refused as Kubernetes refuses it there.
	r := c.Run(t, "", "debug", "p", "--image=busybox:1.36", "--profile=general", "-c", "dbg", "--", "sh", "-c", "true")
	if want := `Error from server (Forbidden): pods "p" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "dbg" must not include "SYS_PTRACE" in securityContext.capabilities.add)`; r.Err == nil || strings.TrimSpace(r.Stderr) != want {
		t.Errorf("kubectl debug --profile=general: %v\n%s\nwant %s", r.Err, r.Stderr, want)
	}
	r = c.Run(t, "", "debug", "p", "--image=busybox:1.36", "--profile=baseline", "-c", "dbg", "--", "sh", "-c", "true")
	if r.Err != nil || strings.Contains(r.Stderr, "panic") {
		t.Fatalf("kubectl debug: %v\nstdout %s\nstderr %s", r.Err, r.Stdout, r.Stderr)
	}
	got, err := client.Get[*api.Pod](context.Background(), e.local, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.EphemeralContainers); n != 1 {
		t.Fatalf("ephemeral containers %+v, want the debugger", got.Spec.EphemeralContainers)
	}
	ec := got.Spec.EphemeralContainers[0]
	if ec.Name != "dbg" || ec.Image != "busybox:1.36" || strings.Join(ec.Command, " ") != "sh -c true" || ec.ImagePullPolicy != api.PullIfNotPresent || ec.TerminationMessagePolicy != "File" {
		t.Errorf("ephemeral container %+v", ec)
	}
	if got := c.Must(t, "", "get", "pod", "p", "-o", "jsonpath={.spec.ephemeralContainers[*].name}"); got != "dbg" {
		t.Errorf("kubectl get: ephemeral containers %q", got)
	}
	desc := c.Must(t, "", "describe", "pod", "p")
	if !strings.Contains(desc, "\nEphemeral Containers:\n  dbg:\n    Image:      busybox:1.36\n") {
		t.Errorf("kubectl describe pod lacks the ephemeral container:\n%s", desc)
	}

	for _, tc := range []struct{ name, want string }{
		{"c", `The Pod "p" is invalid: spec.ephemeralContainers[1].name: Duplicate value: "c"`},
	} {
		r := c.Run(t, "", "debug", "p", "--image=busybox", "--profile=baseline", "-c", tc.name)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("kubectl debug -c %s: %v\n%s\nwant %q", tc.name, r.Err, r.Stderr, tc.want)
		}
	}
	r = c.Run(t, "", "debug", "p", "--image=busybox", "--profile=baseline", "--target=c")
	if want := `spec.ephemeralContainers[1].targetContainerName: field not supported by skiff`; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("kubectl debug --target (no process namespace sharing in skiff): %v\n%s", r.Err, r.Stderr)
	}
	r = c.Run(t, "", "debug", "nope", "--image=busybox", "--profile=baseline")
	if r.Err == nil || !strings.Contains(r.Stderr, `pods "nope" not found`) {
		t.Fatalf("kubectl debug of a missing pod: %v\n%s", r.Err, r.Stderr)
	}
	r = c.Run(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q"},"spec":{"containers":[{"name":"c","image":"busybox"}],"ephemeralContainers":[{"name":"e","image":"busybox"}]}}`, "create", "-f", "-")
	if want := `The Pod "q" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create`; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("create with ephemeral containers: %v\n%s\nwant %q", r.Err, r.Stderr, want)
	}
	r = c.Run(t, "", "patch", "pod", "p", "--type=json", "-p", `[{"op":"replace","path":"/spec/ephemeralContainers/0/image","value":"nginx"}]`)
	if r.Err == nil || !strings.Contains(r.Stderr, "pod updates may not change fields other than") || !strings.Contains(r.Stderr, "ephemeralContainers") {
		t.Errorf("plain patch of an ephemeral container: %v\n%s", r.Err, r.Stderr)
	}
}

// The subresource's own rules, as kube-apiserver's: no ports, probes or
// resources; existing ones never change or go; other changes dropped.
func TestEphemeralContainersRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"a": "b"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := e.local.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	update := func(f func(p *api.Pod)) error {
		cur, err := client.Get[*api.Pod](ctx, e.local, "default", "p")
		if err != nil {
			t.Fatal(err)
		}
		f(cur)
		_, err = e.srv.reg.UpdateEphemeralContainers(ctx, "default", "p", cur)
		return err
	}
	dbg := api.EphemeralContainer{Container: api.Container{Name: "dbg", Image: "busybox"}}
	withPorts := api.EphemeralContainer{Container: api.Container{Name: "x", Image: "busybox", Ports: []api.ContainerPort{{ContainerPort: 80}},
		ReadinessProbe: &api.Probe{Exec: &api.ExecAction{Command: []string{"true"}}}}}
	if err := update(func(p *api.Pod) { p.Spec.EphemeralContainers = []api.EphemeralContainer{withPorts} }); err == nil ||
		err.Error() != `Pod "p" is invalid: [spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container]` {
		t.Errorf("ports and a probe: %v", err)
	}
	if err := update(func(p *api.Pod) {
		p.Spec.EphemeralContainers = []api.EphemeralContainer{dbg}
		p.Labels["a"] = "changed" // dropped: only ephemeral containers change here
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := client.Get[*api.Pod](ctx, e.local, "default", "p")
	if len(got.Spec.EphemeralContainers) != 1 || got.Labels["a"] != "b" {
		t.Errorf("after the update: ephemeral %+v, labels %v", got.Spec.EphemeralContainers, got.Labels)
	}
	if err := update(func(p *api.Pod) { p.Spec.EphemeralContainers = nil }); err == nil ||
		err.Error() != `Pod "p" is invalid: spec: Forbidden: existing ephemeral containers "dbg" may not be removed`+"\n" {
		t.Errorf("removal: %q", err)
	}
	if err := update(func(p *api.Pod) { p.Spec.EphemeralContainers[0].Image = "nginx" }); err == nil ||
		err.Error() != `Pod "p" is invalid: spec.ephemeralContainers[0]: Forbidden: existing ephemeral containers "dbg" may not be changed`+"\n" {
		t.Errorf("change: %q", err)
	}
}
