package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/kubectltest"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
)

// Real kubectl 1.32 streams to real containers: exec (WebSocket v5, with
// stdin and the exit code), cp (tar over exec), port-forward (SPDY over
// WebSocket) answered by busybox httpd, and attach — through the TLS API
// server and the agent's streaming server on containerd.
func TestKubectlStreamingOnContainerd(t *testing.T) {
	e := newCtrdEnv(t)
	cp, c := startControlPlane(t, nil)
	startServedAgent(t, cp, e.runtime(t), "n1")
	k := kubectlFor(t, cp)

	// busybox httpd on a port of its own (the test node has no pod
	// network, so pods share the host's), and a pod that keeps talking.
	port := freePort(t)
	web := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}}
	web.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		Command: []string{"sh", "-c", fmt.Sprintf("mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p %d -h /www", port)}}}
	talker := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "talker", Namespace: "default"}}
	talker.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", ImagePullPolicy: "IfNotPresent",
		Command: []string{"sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.3; done"}}}
	for _, p := range []*api.Pod{web, talker} {
		if _, err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		pods := listPods(t, c, "default", "")
		return runningPods(pods) == 2, podSummary(pods)
	})

	t.Run("exec env", func(t *testing.T) { // the course's exec ... -- env | grep KUBERNETES
		if out := k.Must(t, "", "exec", "web", "--", "env"); !strings.Contains(out, "PATH=") || !strings.Contains(out, "KUBERNETES_SERVICE_HOST=") {
			t.Errorf("kubectl exec web -- env:\n%s", out)
		}
	})
	t.Run("exec -i with stdin", func(t *testing.T) {
		if out := k.Must(t, "ping\npong\n", "exec", "-i", "web", "--", "cat"); out != "ping\npong\n" {
			t.Errorf("kubectl exec -i web -- cat: %q", out)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		r := k.Run(t, "", "exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		var ee *exec.ExitError
		if !errors.As(r.Err, &ee) || ee.ExitCode() != 3 || r.Stdout != "out\n" || !strings.Contains(r.Stderr, "err\n") ||
			!strings.Contains(r.Stderr, "command terminated with exit code 3") {
			t.Errorf("exit 3: err %v, stdout %q, stderr %q", r.Err, r.Stdout, r.Stderr)
		}
	})
	t.Run("exec -t without a terminal", func(t *testing.T) {
		r := k.Run(t, "", "exec", "-i", "-t", "web", "--", "echo", "ok")
		if r.Err != nil || !strings.Contains(r.Stdout, "ok") {
			t.Errorf("exec -it with stdin piped: err %v, stdout %q, stderr %q", r.Err, r.Stdout, r.Stderr)
		}
	})
	t.Run("cp", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "notes.txt")
		content := strings.Repeat("kubectl cp is tar over exec\n", 1000)
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		k.Must(t, "", "cp", src, "default/web:/tmp/notes.txt")
		if out := k.Must(t, "", "exec", "web", "--", "wc", "-c", "/tmp/notes.txt"); !strings.HasPrefix(strings.TrimSpace(out), fmt.Sprint(len(content))) {
			t.Errorf("wc -c of the copied file: %q, want %d bytes", out, len(content))
		}
		back := filepath.Join(dir, "back.txt")
		k.Must(t, "", "cp", "default/web:/tmp/notes.txt", back)
		if got, err := os.ReadFile(back); err != nil || string(got) != content {
			t.Errorf("copied back: %d bytes, %v; want the %d bytes sent", len(got), err, len(content))
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		local := freePort(t)
		out := startKubectl(t, k, "port-forward", "pod/web", fmt.Sprintf("%d:%d", local, port))
		testwait.For(t, 30*time.Second, "kubectl port-forward to listen", func() bool {
			return strings.Contains(out.String(), fmt.Sprintf("Forwarding from 127.0.0.1:%d -> %d", local, port))
		})
		for i := range 3 { // several connections over the one upgraded connection
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
			if err != nil {
				t.Fatalf("GET %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "hello from httpd\n" {
				t.Errorf("GET %d through port-forward: %d %q", i, resp.StatusCode, body)
			}
		}
	})
	t.Run("debug", func(t *testing.T) { // kubectl debug: an ephemeral container in the pod, its logs
		k.Must(t, "", "debug", "web", "--image=busybox:1.36", "--image-pull-policy=IfNotPresent", "--profile=baseline", "-c", "dbg",
			"--", "sh", "-c", fmt.Sprintf("wget -qO- http://127.0.0.1:%d/", port))
		testwait.Until(t, 30*time.Second, func() (bool, string) {
			p, err := client.Get[*api.Pod](t.Context(), c, "default", "web")
			if err != nil {
				return false, err.Error()
			}
			es := p.Status.EphemeralContainerStatuses
			return len(es) == 1 && es[0].State.Terminated != nil && es[0].State.Terminated.ExitCode == 0, fmt.Sprintf("ephemeral container statuses %+v", es)
		})
		if out := k.Must(t, "", "logs", "web", "-c", "dbg"); out != "hello from httpd\n" {
			t.Errorf("kubectl logs web -c dbg: %q", out)
		}
		if out := k.Must(t, "", "describe", "pod", "web"); !strings.Contains(out, "\nEphemeral Containers:\n  dbg:\n") || !strings.Contains(out, "Reason:       Completed") {
			t.Errorf("kubectl describe pod web:\n%s", out)
		}
	})
	t.Run("attach", func(t *testing.T) {
		out := startKubectl(t, k, "attach", "talker")
		re := regexp.MustCompile(`tick (\d+)\n`)
		testwait.For(t, 30*time.Second, "kubectl attach to stream the container's output", func() bool {
			return len(re.FindAllString(out.String(), -1)) >= 2
		})
	})
}

// startServedAgent runs node name with its agent server on loopback and
// the node certificates the API server's proxy needs (exec, attach,
// port-forward and logs reach it).
func startServedAgent(t *testing.T, cp *controlplane.ControlPlane, rt runtime.Runtime, name string) {
	t.Helper()
	cfg := testNodeConfig(rt, name, t.TempDir(), nil)
	creds, err := cp.IssueNodeCredentials(name, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", &creds
	startNode(t, cp, cfg)
}

// kubectlFor writes a kubeconfig for the control plane (its URL, CA and
// admin token) for the real kubectl.
func kubectlFor(t *testing.T, cp *controlplane.ControlPlane) *kubectltest.Cluster {
	t.Helper()
	cc := cp.ClientConfig()
	return kubectltest.Use(t, cc.Server, cc.CAData, cc.Token)
}

// startKubectl runs a long-lived kubectl (port-forward, attach) until the
// test ends and returns its output so far, stdout and stderr together.
func startKubectl(t *testing.T, k *kubectltest.Cluster, args ...string) *lockedBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectltest.Binary(t), append([]string{"--kubeconfig", k.Kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return out
}
