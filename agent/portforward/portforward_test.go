package portforward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	kportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"skiff.dev/skiff/client/kubectl"
)

// echoServer is the "pod": it answers each line with "echo: LINE", and
// "bye" when the client has ended its input.
func echoServer(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo: %s\n", sc.Text())
				}
				fmt.Fprint(c, "bye\n") // after the client's end of input
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

// agentServer serves Serve with the pod's ports mapped to pod (any other
// port is refused).
func agentServer(t *testing.T, podPort int32, pod *net.TCPAddr) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(w, r, func(ctx context.Context, port int32) (net.Conn, error) {
			if port != podPort {
				return nil, fmt.Errorf("dial tcp 127.0.0.1:%d: connect: connection refused", port)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", pod.String())
		})
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

var dialers = []struct {
	name string
	new  func(rc *rest.Config, u *url.URL) (httpstream.Dialer, error)
}{
	{"websocket tunnel", func(rc *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		return kportforward.NewSPDYOverWebsocketDialerForStreaming(u, rc)
	}},
	{"spdy", func(rc *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		tr, up, err := spdy.RoundTripperFor(rc)
		if err != nil {
			return nil, err
		}
		return spdy.NewDialerForStreaming(up, &http.Client{Transport: tr}, http.MethodPost, u), nil
	}},
	{"kubectl fallback", kubectl.NewPortForwardDialer},
}

// forward starts client-go's port forwarder to remote and returns the
// local port.
func forward(t *testing.T, d httpstream.Dialer, remote int32, errOut io.Writer) int {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := kportforward.NewOnAddressesForStreaming(d, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port forward ended before ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("port forward not ready after 20s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v, %v", ports, err)
	}
	return int(ports[0].Local)
}

func TestPortForwardClients(t *testing.T) {
	pod := echoServer(t)
	rc := agentServer(t, 80, pod)
	u, err := url.Parse(rc.Host + "/portforward")
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range dialers {
		t.Run(dl.name, func(t *testing.T) {
			d, err := dl.new(rc, u)
			if err != nil {
				t.Fatal(err)
			}
			local := forward(t, d, 80, io.Discard)
			// Connections one after the other share the upgraded one; the
			// second ends its input first (a half-close): the answer
			// still comes.
			for i := range 2 {
				c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", local), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				fmt.Fprintf(c, "hello %d\n", i)
				if i == 1 {
					_ = c.(*net.TCPConn).CloseWrite()
				}
				want := fmt.Sprintf("echo: hello %d\n", i)
				if i == 1 {
					want += "bye\n"
				}
				got, err := io.ReadAll(io.LimitReader(c, int64(len(want))))
				c.Close()
				if err != nil || string(got) != want {
					t.Errorf("connection %d: %q, %v; want %q", i, got, err, want)
				}
			}
		})
	}
}

// A port nothing listens on fails that connection, with the dial error on
// the error stream, and the forward goes on.
func TestPortForwardRefused(t *testing.T) {
	pod := echoServer(t)
	rc := agentServer(t, 80, pod)
	u, _ := url.Parse(rc.Host + "/portforward")
	d, err := kubectl.NewPortForwardDialer(rc, u)
	if err != nil {
		t.Fatal(err)
	}
	// client-go reports a connection's error through apimachinery's
	// HandleError (kubectl's "E... an error occurred forwarding").
	errs := make(chan string, 8)
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = append(slices.Clone(saved), func(_ context.Context, err error, _ string, _ ...any) {
		select {
		case errs <- err.Error():
		default:
		}
	})
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	local := forward(t, d, 81, io.Discard)
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", local), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read from a refused port: %v, want EOF", err)
	}
	select {
	case msg := <-errs:
		if !strings.Contains(msg, "error forwarding port 81 to pod") || !strings.Contains(msg, "connection refused") {
			t.Errorf("error output %q, want the dial error", msg)
		}
	case <-time.After(20 * time.Second):
		t.Error("no error reported for the refused port")
	}
}
