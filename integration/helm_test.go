package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// Helm 3 against skiff (issue 27): the course's lab environment installs
// things with Helm, so `helm create`'s chart — a Deployment with HTTP
// liveness and readiness probes, a Service, a ServiceAccount — goes
// through install, upgrade, history, rollback and uninstall, with --wait
// (Helm's own readiness checks) at every step. On the simulated runtime
// (TestHelmSimulated) the probes pass because skiff simulates them; on
// real containerd (the "Helm" step of TestKubectlRunbook) busybox httpd
// answers them.

// helmVersion is the Helm built from the module proxy for these tests.
const helmVersion = "v3.22.0"

var helmBin struct {
	once sync.Once
	path string
	err  error
}

// helmBinary builds Helm from the module proxy once per test run (about
// two minutes of CPU the first time) and keeps it in the temp dir for the
// next run; $SKIFF_HELM names one already built instead.
func helmBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SKIFF_HELM"); p != "" {
		return p
	}
	helmBin.once.Do(func() {
		dir := filepath.Join(os.TempDir(), "skiff-helm-"+helmVersion)
		path := filepath.Join(dir, "helm")
		if out, err := exec.Command(path, "version", "--short").Output(); err == nil && strings.HasPrefix(string(out), helmVersion) {
			helmBin.path = path
			return
		}
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
		cmd.Dir = os.TempDir() // outside skiff's module: Helm's own go.mod decides
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmBin.err = fmt.Errorf("go install helm.sh/helm/v3/cmd/helm@%s: %v\n%s", helmVersion, err, out)
			return
		}
		helmBin.path = path
	})
	if helmBin.err != nil {
		t.Fatal(helmBin.err)
	}
	return helmBin.path
}

// helmUser runs helm (and reads the cluster with c) as a user whose
// kubeconfig is the one `skiff up` wrote under home.
type helmUser struct {
	helm, dir string
	env       []string
	c         client.Interface
}

func newHelmUser(t *testing.T, home string, c client.Interface) *helmUser {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "HELM_") {
			env = append(env, kv)
		}
	}
	dir := t.TempDir()
	env = append(env, "HOME="+home, "KUBECONFIG="+filepath.Join(home, ".skiff", "kubeconfig"),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "data"))
	return &helmUser{helm: helmBinary(t), dir: dir, env: env, c: c}
}

func (h *helmUser) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.helm, args...)
	cmd.Env, cmd.Dir = h.env, h.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// readyPods counts the running, ready pods of the release.
func (h *helmUser) readyPods(t *testing.T, ns, release string) (ready, total int) {
	t.Helper()
	objs, _, err := h.c.List(context.Background(), api.MustKindOf(&api.Pod{}), ns,
		api.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		p := o.(*api.Pod)
		if p.DeletionTimestamp != nil {
			continue
		}
		total++
		for _, c := range p.Status.Conditions {
			if c.Type == api.PodReady && c.Status == api.ConditionTrue {
				ready++
			}
		}
	}
	return ready, total
}

// helmCycle installs `helm create`'s chart as release demo in ns and takes
// it through upgrade, history, rollback and uninstall, each with --wait,
// then checks that nothing of it is left.
func (h *helmUser) helmCycle(t *testing.T, ns string) {
	const release = "demo"
	h.run(t, "create", "mychart")
	chart := filepath.Join(h.dir, "mychart")

	out := h.run(t, "install", release, chart, "-n", ns, "--wait", "--timeout", "2m")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", out)
	}
	if ready, total := h.readyPods(t, ns, release); ready != 1 || total != 1 {
		t.Fatalf("after install --wait: %d of %d pods ready, want 1 of 1", ready, total)
	}

	h.run(t, "upgrade", release, chart, "-n", ns, "--set", "replicaCount=2", "--wait", "--timeout", "2m")
	if ready, total := h.readyPods(t, ns, release); ready != 2 || total != 2 {
		t.Fatalf("after upgrade --set replicaCount=2 --wait: %d of %d pods ready, want 2 of 2", ready, total)
	}

	h.run(t, "rollback", release, "1", "-n", ns, "--wait", "--timeout", "2m")
	hist := h.run(t, "history", release, "-n", ns)
	for _, want := range []string{"Install complete", "Upgrade complete", "Rollback to 1"} {
		if !strings.Contains(hist, want) {
			t.Errorf("helm history lacks %q:\n%s", want, hist)
		}
	}
	if r := row(hist, "3"); !slices.Contains(r, "deployed") {
		t.Errorf("helm history: revision 3 is not the deployed one:\n%s", hist)
	}
	testwait.Until(t, time.Minute, func() (bool, string) {
		ready, total := h.readyPods(t, ns, release)
		return ready == 1 && total == 1, fmt.Sprintf("after rollback to 1 replica: %d of %d pods ready", ready, total)
	})

	h.run(t, "uninstall", release, "-n", ns, "--wait", "--timeout", "2m")
	ctx := context.Background()
	testwait.Until(t, time.Minute, func() (bool, string) {
		for _, q := range []struct {
			obj api.Object
			sel string
		}{
			{&api.Deployment{}, "app.kubernetes.io/instance=" + release},
			{&api.ReplicaSet{}, "app.kubernetes.io/instance=" + release},
			{&api.Pod{}, "app.kubernetes.io/instance=" + release},
			{&api.Service{}, "app.kubernetes.io/instance=" + release},
			{&api.ServiceAccount{}, "app.kubernetes.io/instance=" + release},
			{&api.Secret{}, "owner=helm,name=" + release},
		} {
			k := api.MustKindOf(q.obj)
			objs, _, err := h.c.List(ctx, k, ns, api.ListOptions{LabelSelector: q.sel})
			if err != nil {
				return false, err.Error()
			}
			if len(objs) > 0 {
				return false, fmt.Sprintf("after helm uninstall: %d %s left (%s)", len(objs), k.Resource, q.sel)
			}
		}
		return true, ""
	})
}

// helm install --wait of `helm create`'s chart on the simulated runtime:
// its HTTP probes pass although nothing listens (simulated), so a laptop
// without root runs the most common first chart.
func TestHelmSimulated(t *testing.T) {
	bin := skiffBinary(t)
	home := t.TempDir()
	startSkiffUp(t, bin, home, filepath.Join(home, "data"), freeLoopbackAddr(t))
	cfg, err := client.LoadKubeconfig(filepath.Join(home, ".skiff", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	newHelmUser(t, home, c).helmCycle(t, "default")
}
