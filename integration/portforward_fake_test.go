package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/cli"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
	"skiff.dev/skiff/internal/testwait"
)

// port-forward end to end without containerd: the in-process control plane
// and fake-runtime agent of startCluster, and a loopback TCP server standing
// in for the pod's process (a fake pod has no network namespace, so the
// agent reaches it on 127.0.0.1 of the node, as it would a host-network
// pod). Bytes go local connection → CLI → API server → agent → "pod".

// echoServer answers every line on a connection with "pod: LINE" until
// the client closes; it stops at cleanup.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "pod: %s\n", sc.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestPortForwardFake(t *testing.T) {
	cl := startCluster(t)
	cfgPath := filepath.Join(cl.dir, "config")
	if err := client.WriteKubeconfig(cfgPath, cl.cp.ClientConfig()); err != nil {
		t.Fatal(err)
	}
	podPort := echoServer(t)
	d := deployment("default", "web", 1, api.Container{Name: "web", Image: "nginx:1.27",
		Command: []string{"sh", "-c", "sleep 3600"}, Ports: []api.ContainerPort{{Name: "echo", ContainerPort: int32(podPort)}}})
	if _, err := cl.c.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the deployment's pod to run", func() bool {
		pods, _, err := client.List[*api.Pod](t.Context(), cl.c, "default", api.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods) == 1 && pods[0].Status.Phase == api.PodRunning
	})

	// skiff port-forward deployment/web :echo :CLOSED — a free local
	// port for each, the first by port name.
	closed := freePort(t)
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut lockedBuffer
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = cli.Main(ctx, []string{"--kubeconfig", cfgPath, "port-forward", "deployment/web", ":echo", "0:" + strconv.Itoa(closed)}, &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("port-forward did not stop within 10s of its context")
		}
	})
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)\n`)
	local := map[int]int{} // remote → local
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		for _, m := range re.FindAllStringSubmatch(out.String(), -1) {
			l, _ := strconv.Atoi(m[1])
			r, _ := strconv.Atoi(m[2])
			local[r] = l
		}
		select {
		case <-done: // it gave up: what it said is the reason
			t.Fatalf("port-forward ended before it listened: %v\n%s%s", runErr, out.String(), errOut.String())
		default:
		}
		return len(local) == 2, "port-forward to listen: " + out.String() + errOut.String()
	})

	// Several connections at once, each its own stream to the pod.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- converse(local[podPort], fmt.Sprintf("hello %d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := strings.Count(out.String(), fmt.Sprintf("Handling connection for %d\n", local[podPort])); n != 4 {
		t.Errorf("%d \"Handling connection\" lines, want 4:\n%s", n, out.String())
	}

	// A port nothing listens on: the local connection is closed, and, as
	// with kubectl 1.32 (client-go's forwarder), the whole port-forward
	// ends with "lost connection to pod" (the error itself goes to klog).
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local[closed])), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read from a forward to a closed port: %d bytes, %v; want EOF", n, err)
	}
	c.Close()
	select {
	case <-done:
		if runErr == nil || !strings.Contains(runErr.Error(), "lost connection to pod") {
			t.Errorf("port-forward after a failed connection: %v, want lost connection to pod", runErr)
		}
	case <-time.After(20 * time.Second):
		t.Error("port-forward still runs 20s after a failed connection; kubectl ends")
	}

	// The subresource itself: an unknown pod is a NotFound Status, and a
	// wrong token is refused, whichever protocol asks.
	for _, tc := range []struct{ token, want string }{
		{cl.cp.ClientConfig().Token, `pods "nope" not found`},
		{"wrong", "Unauthorized"},
	} {
		cc := cl.cp.ClientConfig()
		cc.Token = tc.token
		rc := kubectl.RESTConfig(cc)
		u, _ := kubectl.URL(rc, client.PathFor(api.MustKindOf(&api.Pod{}), "default", "nope", "portforward"), nil)
		d, err := kubectl.NewPortForwardDialer(rc, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Dial("portforward.k8s.io"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("port-forward to a missing pod with token %q: %v, want %q", tc.token, err, tc.want)
		}
	}
}

// converse sends line over a new connection to 127.0.0.1:port and checks
// the echo server's answer.
func converse(port int, line string) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for range 2 {
		if _, err := fmt.Fprintln(c, line); err != nil {
			return err
		}
		got, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("answer to %q: %w", line, err)
		}
		if want := "pod: " + line + "\n"; got != want {
			return fmt.Errorf("answer %q, want %q", got, want)
		}
	}
	return nil
}
