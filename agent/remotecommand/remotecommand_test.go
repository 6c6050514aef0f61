package remotecommand

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	kremotecommand "k8s.io/client-go/tools/remotecommand"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"skiff.dev/skiff/client/kubectl"
)

// The clients kubectl and the Python client use, each against the agent's
// handler: WebSocket v5 (kubectl 1.30+), WebSocket v4 (the Python client),
// SPDY v4 (kubectl's fallback) and kubectl's own fallback executor.
var clients = []struct {
	name string
	// closesStdin: the protocol can tell the server that stdin ended
	// (WebSocket v4 cannot).
	closesStdin bool
	new         func(rc *rest.Config, u *url.URL) (kremotecommand.Executor, error)
}{
	{"websocket v5", true, func(rc *rest.Config, u *url.URL) (kremotecommand.Executor, error) {
		return kremotecommand.NewWebSocketExecutor(rc, "GET", u.String())
	}},
	{"websocket v4", false, func(rc *rest.Config, u *url.URL) (kremotecommand.Executor, error) {
		return kremotecommand.NewWebSocketExecutorForProtocols(rc, "GET", u.String(), crirc.StreamProtocolV4Name)
	}},
	{"spdy v4", true, func(rc *rest.Config, u *url.URL) (kremotecommand.Executor, error) {
		return kremotecommand.NewSPDYExecutor(rc, "POST", u)
	}},
	{"kubectl fallback", true, kubectl.NewExecutor},
}

// fakeCommand is what the tests' ExecFunc runs, by its first word.
func fakeCommand(ctx context.Context, cmd []string, s Streams) (int, error) {
	switch cmd[0] {
	case "echo": // echo OUT ERR CODE: OUT to stdout, ERR to stderr, exit CODE
		fmt.Fprint(s.Stdout, cmd[1])
		if s.Stderr != nil {
			fmt.Fprint(s.Stderr, cmd[2])
		}
		var code int
		fmt.Sscan(cmd[3], &code)
		return code, nil
	case "cat": // stdin to stdout until EOF
		_, err := io.Copy(s.Stdout, s.Stdin)
		return 0, err
	case "head": // the first line of stdin to stdout
		line, err := bufio.NewReader(s.Stdin).ReadString('\n')
		fmt.Fprint(s.Stdout, line)
		if err != nil {
			return 1, nil
		}
		return 0, nil
	case "stty": // the first terminal size, as "WxH"
		select {
		case size, ok := <-s.Resize:
			if !ok {
				return 2, nil
			}
			fmt.Fprintf(s.Stdout, "%dx%d", size.Width, size.Height)
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return 0, errors.New("no such command in the fake")
}

func execServer(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ParseOptions(r.URL.Query(), true)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ServeExec(w, r, o, func(ctx context.Context, s Streams) (int, error) {
			return fakeCommand(ctx, o.Command, s)
		})
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

type oneSize struct {
	once sync.Once
	size kremotecommand.TerminalSize
}

func (q *oneSize) Next() *kremotecommand.TerminalSize {
	var s *kremotecommand.TerminalSize
	q.once.Do(func() { s = &q.size })
	return s // nil after the first: the client stops sending sizes
}

func TestExecClients(t *testing.T) {
	rc := execServer(t)
	type result struct {
		stdout, stderr string
		code           int // -1: a non-exit error
	}
	cases := []struct {
		name      string
		opts      Options
		stdin     string
		needClose bool                         // needs the client to close stdin
		size      *kremotecommand.TerminalSize // sent once, on a TTY
		want      result
	}{
		{name: "output and success", opts: Options{Command: []string{"echo", "out", "err", "0"}, Stdout: true, Stderr: true},
			want: result{"out", "err", 0}},
		{name: "exit code", opts: Options{Command: []string{"echo", "o", "e", "3"}, Stdout: true, Stderr: true},
			want: result{"o", "e", 3}},
		{name: "stdin line", opts: Options{Command: []string{"head"}, Stdin: true, Stdout: true}, stdin: "ping\npong\n",
			want: result{"ping\n", "", 0}},
		{name: "stdin to eof", opts: Options{Command: []string{"cat"}, Stdin: true, Stdout: true}, stdin: "a\nb\n", needClose: true,
			want: result{"a\nb\n", "", 0}},
		{name: "tty resize", opts: Options{Command: []string{"stty"}, Stdout: true, TTY: true},
			size: &kremotecommand.TerminalSize{Width: 120, Height: 40}, want: result{"120x40", "", 0}},
		{name: "error", opts: Options{Command: []string{"nope"}, Stdout: true}, want: result{"", "", -1}},
	}
	for _, cl := range clients {
		for _, tc := range cases {
			if tc.needClose && !cl.closesStdin {
				continue
			}
			t.Run(cl.name+"/"+tc.name, func(t *testing.T) {
				u, err := kubectl.URL(rc, "/exec", kubectl.ExecOptions(tc.opts).Query())
				if err != nil {
					t.Fatal(err)
				}
				ex, err := cl.new(rc, u)
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				so := kremotecommand.StreamOptions{Stdout: &stdout, Tty: tc.opts.TTY}
				if tc.size != nil {
					so.TerminalSizeQueue = &oneSize{size: *tc.size}
				}
				if tc.opts.Stderr {
					so.Stderr = &stderr
				}
				if tc.opts.Stdin {
					so.Stdin = strings.NewReader(tc.stdin)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				err = ex.StreamWithContext(ctx, so)
				got := result{stdout.String(), stderr.String(), 0}
				var exit interface{ ExitStatus() int }
				switch {
				case errors.As(err, &exit):
					got.code = exit.ExitStatus()
				case err != nil:
					got.code = -1
					if !strings.Contains(err.Error(), "no such command in the fake") {
						t.Errorf("error %q does not carry the command's error", err)
					}
				}
				if got != tc.want {
					t.Errorf("got %+v, want %+v (err %v)", got, tc.want, err)
				}
			})
		}
	}
}

func TestAttachClients(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, err := ParseOptions(r.URL.Query(), false)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ServeAttach(w, r, o, func(ctx context.Context, s Streams) error {
			_, err := io.WriteString(s.Stdout, "attached output\n")
			return err
		})
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			u, _ := kubectl.URL(rc, "/attach", kubectl.ExecOptions{Stdout: true}.Query())
			ex, err := cl.new(rc, u)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ex.StreamWithContext(t.Context(), kremotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "attached output\n" {
				t.Errorf("attach: %q, %v", out.String(), err)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	cases := []struct {
		name    string
		query   string
		exec    bool
		want    Options
		wantErr string
	}{
		{name: "kubectl exec", query: "command=sh&command=-c&command=env&container=c&stdout=true&stderr=true", exec: true,
			want: Options{Command: []string{"sh", "-c", "env"}, Container: "c", Stdout: true, Stderr: true}},
		{name: "tty drops stderr", query: "command=sh&stdin=1&stdout=1&stderr=1&tty=1", exec: true,
			want: Options{Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}},
		{name: "attach needs no command", query: "stdout=true",
			want: Options{Stdout: true}},
		{name: "exec needs a command", query: "stdout=true", exec: true, wantErr: "at least one command"},
		{name: "no stream", query: "command=ls", exec: true, wantErr: "at least 1 of stdin, stdout, stderr"},
		{name: "bad bool", query: "command=ls&stdout=yes&tty=maybe", exec: true, wantErr: `stdout: invalid value "yes": want true or false` + "\n" + `tty: invalid value "maybe"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := ParseOptions(q, tc.exec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ParseOptions(%s) = %+v, %v; want %+v", tc.query, got, err, tc.want)
			}
			// The client's query (client/kubectl) is ParseOptions' inverse.
			again, err := ParseOptions(kubectl.ExecOptions(got).Query(), tc.exec)
			if err != nil || fmt.Sprint(again) != fmt.Sprint(got) {
				t.Errorf("ParseOptions(Query()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

// The v5 server's own Close ends wsstream's read with net.ErrClosed, once
// per exec: that error is not logged; any other still is.
func TestQuietCloseLogger(t *testing.T) {
	var lines []string
	rec := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	ctx := quietCloseLogger(klog.NewContext(context.Background(), rec))
	l := klog.FromContext(ctx).WithValues("conn", 1).WithName("wsstream")
	l.Error(&net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}, "Error on socket receive")
	l.Error(errors.New("protocol error"), "Unable to write frame")
	if len(lines) != 1 || !strings.Contains(lines[0], "Unable to write frame") || !strings.Contains(lines[0], `"conn"=1`) {
		t.Errorf("logged %q; want only the protocol error, with its values", lines)
	}
	// A context whose logger discards stays as it is.
	d := klog.NewContext(context.Background(), logr.Discard())
	if got := quietCloseLogger(d); got != d {
		t.Error("quietCloseLogger wrapped a discarding logger")
	}
}
