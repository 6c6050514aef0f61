package apiserver

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
)

// kubectl debug against skiff, which has no ephemeral containers: the
// PATCH of pods/NAME/ephemeralcontainers is kube-apiserver's 404 for a
// missing subresource (details present and empty), which the real
// kubectl turns into its own clear refusal instead of crashing on a nil
// details.
func TestKubectlDebugRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := e.local.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	r := c.Run(t, "", "debug", "p", "--image=busybox", "--profile=general")
	want := `error: ephemeral containers are disabled for this cluster (error from server: "the server could not find the requested resource")`
	if r.Err == nil || strings.TrimSpace(r.Stderr) != want || strings.Contains(r.Stderr, "panic") {
		t.Fatalf("kubectl debug: %v\nstdout %s\nstderr %s", r.Err, r.Stdout, r.Stderr)
	}
	// A missing pod is still the pod's NotFound.
	r = c.Run(t, "", "debug", "nope", "--image=busybox", "--profile=general")
	if r.Err == nil || !strings.Contains(r.Stderr, `pods "nope" not found`) {
		t.Fatalf("kubectl debug of a missing pod: %v\n%s", r.Err, r.Stderr)
	}
}
