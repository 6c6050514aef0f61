package apiserver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
	"skiff.dev/skiff/controlplane/controllers"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
)

// skiff's drain (client/kubectl.Drainer, which `skiff drain` prints) says
// what the real kubectl 1.32 says on the same cluster: a node with a
// DaemonSet pod is refused without --ignore-daemonsets in the same words,
// a bare pod as well makes kubectl's bracketed aggregate of both reasons,
// and with --ignore-daemonsets --force the warning line names both.
func TestKubectlDrainSaysWhatSkiffSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controllers.Run(ctx, e.local, e.local, controllers.Options{}) }()
	t.Cleanup(func() { cancel(); <-done })
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	fakeNodes(t, e.local, "n1", "n2")
	file := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(file, []byte(fluentdDaemonSet), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Must(t, "", "apply", "-f", file)
	var daemon string
	testwait.For(t, 20*time.Second, "a running DaemonSet pod on n1", func() bool {
		pods, _, err := client.List[*api.Pod](t.Context(), e.local, "default", api.ListOptions{FieldSelector: "spec.nodeName=n1"})
		if err != nil || len(pods) != 1 || pods[0].Status.Phase != api.PodRunning {
			return false
		}
		daemon = "default/" + pods[0].Name
		return true
	})
	skiff := func(d kubectl.Drainer) (string, error) {
		var errOut bytes.Buffer
		d.Client, d.Out, d.ErrOut, d.Timeout = e.local, &bytes.Buffer{}, &errOut, 10*time.Second
		err := d.DeletePods(t.Context(), "n1")
		return errOut.String(), err
	}

	// The DaemonSet pod alone: one reason, no brackets.
	_, err := skiff(kubectl.Drainer{})
	if err == nil {
		t.Fatal("skiff drained n1 with a DaemonSet pod and no --ignore-daemonsets")
	}
	want := "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " + daemon
	r := c.Run(t, "", "drain", "n1")
	wantStderr := `error: unable to drain node "n1" due to error: ` + want + ", continuing command...\n" +
		"There are pending nodes to be drained:\n n1\n" + want + "\n"
	if err.Error() != want || r.Err == nil || r.Stderr != wantStderr {
		t.Errorf("skiff: %v\nkubectl: %v\n%s\nwant:\n%s", err, r.Err, r.Stderr, wantStderr)
	}

	// And a bare pod: both reasons, bracketed (kubectl's order is a map's).
	bare := func() *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "bare"}}
		p.Spec.NodeName = "n1"
		p.Spec.Containers = []api.Container{{Name: "c", Image: "busybox"}}
		return p
	}
	if _, err := e.local.Create(t.Context(), bare()); err != nil {
		t.Fatal(err)
	}
	_, err = skiff(kubectl.Drainer{})
	// "cannot delete" twice: kubectl 1.32's words.
	unmanaged := "cannot delete cannot delete Pods that declare no controller (use --force to override): default/bare"
	r = c.Run(t, "", "drain", "n1")
	var refusal *kubectl.Refusal
	if !errors.As(err, &refusal) || len(refusal.Reasons) != 2 {
		t.Fatalf("two reasons: skiff %v", err)
	}
	// kubectl's order of the reasons is a map's: either order is its.
	a, b := refusal.Reasons[0], refusal.Reasons[1]
	for _, order := range [][2]string{{a, b}, {b, a}} {
		wantStderr = `error: unable to drain node "n1" due to error: [` + order[0] + ", " + order[1] + "], continuing command...\n" +
			"There are pending nodes to be drained:\n n1\n" + order[0] + "\n" + order[1] + "\n"
		if r.Stderr == wantStderr {
			break
		}
	}
	if r.Stderr != wantStderr || !(a == want && b == unmanaged || a == unmanaged && b == want) {
		t.Errorf("two reasons: skiff %v\nkubectl:\n%s", err, r.Stderr)
	}

	// --ignore-daemonsets --force: one warning line, "; " between reasons.
	warnSkiff, err := skiff(kubectl.Drainer{IgnoreDaemonSets: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.local.Create(t.Context(), bare()); err != nil { // skiff's drain deleted it
		t.Fatal(err)
	}
	r = c.Run(t, "", "drain", "n1", "--ignore-daemonsets", "--force", "--timeout=20s")
	if r.Err != nil {
		t.Fatalf("kubectl drain --ignore-daemonsets --force: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	warnKubectl := ""
	for _, l := range strings.SplitAfter(r.Stderr, "\n") {
		if strings.HasPrefix(l, "Warning: ") {
			warnKubectl = l
		}
	}
	split := func(w string) map[string]bool {
		out := map[string]bool{}
		for _, part := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(w, "Warning: "), "\n"), "; ") {
			out[part] = true
		}
		return out
	}
	ws, wk := split(warnSkiff), split(warnKubectl)
	if len(ws) != 2 || len(wk) != 2 || !ws["ignoring DaemonSet-managed Pods: "+daemon] || !wk["ignoring DaemonSet-managed Pods: "+daemon] ||
		!ws["deleting Pods that declare no controller: default/bare"] || !wk["deleting Pods that declare no controller: default/bare"] {
		t.Errorf("warnings: skiff %q, kubectl %q", warnSkiff, warnKubectl)
	}
	if !strings.Contains(r.Stdout, "node/n1 drained") {
		t.Errorf("kubectl drain: %s", r.Stdout)
	}
	if _, err := client.Get[*api.Pod](t.Context(), e.local, "default", strings.TrimPrefix(daemon, "default/")); err != nil {
		t.Errorf("the DaemonSet pod is gone after drain --ignore-daemonsets: %v", err)
	}
}
