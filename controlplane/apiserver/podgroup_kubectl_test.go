package apiserver

import (
	"strings"
	"testing"

	"skiff.dev/skiff/internal/kubectltest"
)

// The real kubectl with the PodGroup kind (scheduler-plugins' CRD):
// apply, get podgroups / pg with the CRD's printer columns, a status
// write shown in them, and minMember's validation.
func TestKubectlPodGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	const pg = `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: nginx
  namespace: default
spec:
  scheduleTimeoutSeconds: 10
  minMember: 3
`
	if out := c.Must(t, pg, "apply", "-f", "-"); !strings.Contains(out, "podgroup.scheduling.x-k8s.io/nginx created") {
		t.Fatalf("apply: %s", out)
	}
	if out := c.Must(t, pg, "apply", "-f", "-"); !strings.Contains(out, "podgroup.scheduling.x-k8s.io/nginx unchanged") {
		t.Errorf("second apply: %s", out)
	}
	header := func(out string) []string { return strings.Fields(strings.SplitN(out, "\n", 2)[0]) }
	rows := func(out string) [][]string {
		var r [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			r = append(r, strings.Fields(l))
		}
		return r
	}
	for _, name := range []string{"podgroups", "pg", "pgs", "podgroup.scheduling.x-k8s.io"} {
		out := c.Must(t, "", "get", name)
		if got, want := strings.Join(header(out), " "), "NAME PHASE MINMEMBER RUNNING SUCCEEDED FAILED AGE"; got != want {
			t.Fatalf("get %s header %q, want %q", name, got, want)
		}
		// Nothing has written status yet: PHASE and the counts are empty
		// cells, as a CRD's columns for fields the object leaves out.
		if r := rows(out); len(r) != 1 || r[0][0] != "nginx" || r[0][1] != "3" || len(r[0]) != 3 {
			t.Errorf("get %s rows %q, want nginx, minMember 3, age", name, r)
		}
	}
	status := `{"status":{"phase":"Running","running":3}}`
	c.Must(t, "", "patch", "podgroup", "nginx", "--subresource=status", "--type=merge", "-p", status)
	r := rows(c.Must(t, "", "get", "pg", "nginx"))
	if len(r) != 1 || strings.Join(r[0][:4], " ") != "nginx Running 3 3" {
		t.Errorf("after the status write: %q, want nginx Running 3 3 ...", r)
	}
	bad := c.Run(t, strings.Replace(pg, "minMember: 3", "minMember: -1", 1), "apply", "-f", "-")
	if bad.Err == nil || !strings.Contains(bad.Stderr, "spec.minMember") {
		t.Errorf("minMember -1: err %v, stderr %s", bad.Err, bad.Stderr)
	}
	if out := c.Must(t, "", "api-resources", "--api-group=scheduling.x-k8s.io"); !strings.Contains(out, "podgroups") || !strings.Contains(out, "pg,pgs") {
		t.Errorf("api-resources: %s", out)
	}
}
