package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kremotecommand "k8s.io/client-go/tools/remotecommand"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// Logs and exec end to end, without containerd: an in-process control
// plane on a loopback port, one agent on the fake runtime talking to it
// over HTTP like a remote agent, with its logs/exec server on another
// loopback port. Requests go CLI/client → API server → proxy → agent →
// runtime and back.

type fakeCluster struct {
	cp  *controlplane.ControlPlane
	c   *client.Client
	rt  *rtfake.Runtime
	dir string
}

func startCluster(t *testing.T) *fakeCluster {
	t.Helper()
	dir := t.TempDir()
	cp, c := startControlPlane(t, nil)
	rt := rtfake.New(rtfake.DefaultConfig())
	cfg := testNodeConfig(rt, "node-1", filepath.Join(dir, "agent"), func(a *agent.Config) {
		a.BaseBackoff, a.MaxBackoff = 10*time.Millisecond, 20*time.Millisecond
	})
	cfg.RuntimeSimulated = true
	cfg.Listen, cfg.Credentials = "127.0.0.1:0", nodeCredentials(t, cp, cfg.Name, "127.0.0.1")
	startNode(t, cp, cfg)
	return &fakeCluster{cp: cp, c: c, rt: rt, dir: dir}
}

func (cl *fakeCluster) runPod(t *testing.T, name, script string) *api.Pod {
	t.Helper()
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}}}
	p.Spec.Containers = []api.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", script}}}
	if _, err := cl.c.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	var out *api.Pod
	testwait.For(t, 20*time.Second, "pod "+name+" to run", func() bool {
		got, err := client.Get[*api.Pod](t.Context(), cl.c, "default", name)
		out = got
		return err == nil && got.Status.Phase == api.PodRunning
	})
	return out
}

func (cl *fakeCluster) containerID(t *testing.T, p *api.Pod) string {
	t.Helper()
	var id string
	testwait.For(t, 20*time.Second, "the running container of "+p.Name, func() bool {
		cs, err := cl.rt.ListContainers(t.Context(), map[string]string{runtime.LabelPodUID: p.UID})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.State == runtime.StateRunning {
				id = c.ID
				return true
			}
		}
		return false
	})
	return id
}

func (cl *fakeCluster) logs(t *testing.T, ctx context.Context, name, query string) (string, error) {
	t.Helper()
	body, err := cl.c.Stream(ctx, "/api/v1/namespaces/default/pods/"+name+"/log"+query)
	if err != nil {
		return "", err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	return string(b), err
}

func TestLogsThroughTheAPIServer(t *testing.T) {
	cl := startCluster(t)
	p := cl.runPod(t, "talker", "echo hello; echo world; sleep 3600")

	if got, err := cl.logs(t, t.Context(), "talker", ""); err != nil || got != "hello\nworld\n" {
		t.Errorf("logs = %q, %v; want hello, world", got, err)
	}
	if got, err := cl.logs(t, t.Context(), "talker", "?tailLines=1&container=main"); err != nil || got != "world\n" {
		t.Errorf("logs --tail 1 = %q, %v; want world", got, err)
	}

	// Errors come back as Status objects, from the API server or the agent.
	for _, tc := range []struct{ name, query, want string }{
		{"nope", "", `pods "nope" not found`},
		{"talker", "?container=other", "container other is not valid for pod talker"},
		{"talker", "?previous=true", `previous terminated container "main" in pod "talker" not found`},
	} {
		if _, err := cl.logs(t, t.Context(), tc.name, tc.query); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("logs %s%s: error %v, want %q", tc.name, tc.query, err, tc.want)
		}
	}
	bad, _ := client.New(client.Config{Server: cl.cp.URL(), Token: "wrong", CAData: cl.cp.CA().CertPEM()})
	if _, err := bad.Stream(t.Context(), "/api/v1/namespaces/default/pods/talker/log"); api.ReasonOf(err) != api.ReasonUnauthorized {
		t.Errorf("logs with a wrong token: %v, want Unauthorized", err)
	}

	// Follow: lines written later arrive while the stream is open.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	body, err := cl.c.Stream(ctx, "/api/v1/namespaces/default/pods/talker/log?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	lines := bufio.NewScanner(body)
	id := cl.containerID(t, p)
	if err := cl.rt.WriteLog(id, "later"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 && lines.Scan() {
		got = append(got, lines.Text())
	}
	if strings.Join(got, ",") != "hello,world,later" {
		t.Errorf("followed lines %q", got)
	}
	cancel()

	// A crash: the container restarts, and --previous reads the old one.
	if err := cl.rt.Exit(id, 1, ""); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the restart", func() bool {
		got, err := client.Get[*api.Pod](t.Context(), cl.c, "default", "talker")
		return err == nil && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].RestartCount == 1 &&
			got.Status.ContainerStatuses[0].State.Running != nil
	})
	newID := cl.containerID(t, p)
	if err := cl.rt.WriteLog(newID, "second life"); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.logs(t, t.Context(), "talker", "?previous=true"); err != nil || !strings.HasPrefix(got, "hello\nworld\nlater\n") {
		t.Errorf("logs --previous = %q, %v; want the first attempt's", got, err)
	}
	if got, err := cl.logs(t, t.Context(), "talker", ""); err != nil || !strings.HasSuffix(got, "second life\n") || strings.Contains(got, "later") {
		t.Errorf("logs after the restart = %q, %v; want the new attempt's", got, err)
	}
}

func TestExecThroughTheAPIServer(t *testing.T) {
	cl := startCluster(t)
	cl.runPod(t, "shell", "sleep 3600")
	path := "/api/v1/namespaces/default/pods/shell/exec"
	// client-go's executor, kubectl's: WebSocket v5, SPDY as the fallback.
	exec := func(token string, o kubectl.ExecOptions, stdin io.Reader) (string, string, int, error) {
		t.Helper()
		cfg := cl.cp.ClientConfig()
		cfg.Token = token
		rc := kubectl.RESTConfig(cfg)
		o.Stdout, o.Stderr, o.Stdin = true, true, stdin != nil
		u, err := kubectl.URL(rc, path, o.Query())
		if err != nil {
			return "", "", 0, err
		}
		ex, err := kubectl.NewExecutor(rc, u)
		if err != nil {
			return "", "", 0, err
		}
		var out, errOut bytes.Buffer
		err = ex.StreamWithContext(t.Context(), kremotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errOut})
		var exit interface{ ExitStatus() int }
		if errors.As(err, &exit) {
			return out.String(), errOut.String(), exit.ExitStatus(), nil
		}
		return out.String(), errOut.String(), 0, err
	}
	token := cl.cp.ClientConfig().Token

	out, _, code, err := exec(token, kubectl.ExecOptions{Command: []string{"sh", "-c", "echo hi there; exit 3"}}, nil)
	if err != nil || out != "hi there\n" || code != 3 {
		t.Errorf("exec sh -c: %q, code %d, %v; want hi there and exit code 3", out, code, err)
	}
	out, _, code, err = exec(token, kubectl.ExecOptions{Command: []string{"cat"}, Container: "main"}, strings.NewReader("ping\npong\n"))
	if err != nil || out != "ping\npong\n" || code != 0 {
		t.Errorf("exec cat with stdin: %q, code %d, %v", out, code, err)
	}
	if _, _, _, err := exec(token, kubectl.ExecOptions{Command: []string{"true"}, Container: "nope"}, nil); err == nil || !strings.Contains(err.Error(), "container nope is not valid") {
		t.Errorf("exec in an unknown container: %v", err)
	}
	if _, _, _, err := exec("wrong", kubectl.ExecOptions{Command: []string{"true"}}, nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("exec with a wrong token: %v, want Unauthorized", err)
	}
}

// The CLI verbs, against the same cluster: logs of a deployment's pod, and
// exec's exit code as skiff's.
func TestLogsAndExecCLI(t *testing.T) {
	cl := startCluster(t)
	cfgPath := filepath.Join(cl.dir, "config")
	if err := client.WriteKubeconfig(cfgPath, cl.cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	d := &api.Deployment{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}}
	one := int32(1)
	d.Spec.Replicas = &one
	d.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d.Spec.Template.Labels = map[string]string{"app": "web"}
	d.Spec.Template.Spec.Containers = []api.Container{{Name: "web", Image: "nginx:1.27", Command: []string{"sh", "-c", "echo serving; sleep 3600"}}}
	if _, err := cl.c.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the deployment's pod to run", func() bool {
		pods, _, err := client.List[*api.Pod](t.Context(), cl.c, "default", api.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods) == 1 && pods[0].Status.Phase == api.PodRunning
	})
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := cli.Main(t.Context(), append([]string{"--kubeconfig", cfgPath}, args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}

	if out, errOut, err := run("logs", "deployment/web"); err != nil || out != "serving\n" {
		t.Errorf("skiff logs deployment/web: %q %q %v", out, errOut, err)
	}
	if out, errOut, err := run("logs", "-l", "app=web", "--prefix"); err != nil || !strings.HasPrefix(out, "[pod/web-") || !strings.HasSuffix(out, "/web] serving\n") {
		t.Errorf("skiff logs -l app=web --prefix: %q %q %v", out, errOut, err)
	}
	if out, errOut, err := run("exec", "deployment/web", "--", "sh", "-c", "echo inside; exit 4"); cli.ExitCode(err) != 4 || out != "inside\n" ||
		!strings.Contains(errOut, "command terminated with exit code 4") {
		t.Errorf("skiff exec ... exit 4: %q %q exit %d (%v), want exit code 4", out, errOut, cli.ExitCode(err), err)
	}
	// One buffer for stdout and stderr, as `2>&1` gives a script: client-go
	// copies both streams at once, and neither may cut the other's off.
	var both bytes.Buffer
	if err := cli.Main(t.Context(), []string{"--kubeconfig", cfgPath, "exec", "deployment/web", "--", "sh", "-c", "echo inside; exit 4"}, &both, &both); cli.ExitCode(err) != 4 ||
		both.String() != "inside\ncommand terminated with exit code 4\n" {
		t.Errorf("skiff exec ... exit 4 into one buffer: %q exit %d (%v)", both.String(), cli.ExitCode(err), err)
	}
	if _, _, err := run("exec", "deployment/web", "--", "true"); err != nil {
		t.Errorf("skiff exec ... true: %v", err)
	}
}
