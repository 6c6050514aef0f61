// Package remotecommand is the server side of `kubectl exec`, `kubectl
// attach` (and `kubectl cp`, which is tar over exec) on a skiff node: the
// same streaming protocols the kubelet speaks, so real kubectl, client-go
// and the Python client work unchanged.
//
// # The connection
//
// The client sends
//
//	GET or POST /api/v1/namespaces/NS/pods/NAME/exec?command=sh&command=-c&command=...&container=C&stdin=true&stdout=true&stderr=true&tty=true
//	Connection: Upgrade
//	Upgrade: websocket               (or SPDY/3.1)
//	Sec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io, ...
//
// to the API server, which checks the credentials and the pod and passes
// the request on, upgrade and all, to the agent of the pod's node (GET or
// POST /pods/NS/NAME/exec, same query; attach is the same without the
// command). The agent checks the container, answers "101 Switching
// Protocols" and from then on the connection carries the command's streams.
// Anything wrong before that is an ordinary HTTP error with a Kubernetes
// Status body (pod not found, container not running, ...).
//
// # Protocols
//
// Every protocol carries the same five streams: 0 stdin, 1 stdout, 2 stderr
// (with a TTY everything comes on stdout), 3 error (the result), 4 resize
// (JSON {"Width":W,"Height":H} per terminal size change).
//
//   - WebSocket v5.channel.k8s.io (kubectl 1.30 and later): every binary
//     message is one byte of stream number and the payload. A message
//     [255, N] closes stream N, which is how the client ends stdin.
//   - WebSocket v4.channel.k8s.io (the Python client), channel.k8s.io and
//     base64.channel.k8s.io (older clients): the same framing without the
//     close signal (base64: text messages, stream number as an ASCII digit).
//   - SPDY/3.1 with X-Stream-Protocol-Version v4.channel.k8s.io (and v3, v2,
//     channel.k8s.io): one SPDY stream per stream, named by its streamType
//     header; kubectl falls back to it when the WebSocket upgrade fails.
//
// The v4 and v5 result, on the error stream, is a metav1.Status: Success,
// or Failure with reason NonZeroExitCode and the exit code as the cause
// ExitCode's message — that is how kubectl learns the command's exit code.
// Older protocols only send an error text.
//
// # Which code does it
//
// SPDY and WebSocket v4 and older are k8s.io/cri-streaming's
// ServeExec/ServeAttach: the kubelet's streaming server, moved out of
// k8s.io/kubernetes into its own module. Its WebSocket side stops at v4,
// because in Kubernetes the API server terminates kubectl's v5 WebSocket and
// speaks SPDY to the kubelet (k8s.io/apiserver's StreamTranslator). skiff's
// API server passes upgrades through instead, so this package serves v5
// itself, over k8s.io/streaming's wsstream (which implements the close
// signal): about a hundred lines here instead of the API server depending
// on all of k8s.io/apiserver.
package remotecommand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// Timeouts of a connection, the kubelet's defaults.
const (
	// IdleTimeout closes a connection on which nothing moved for this
	// long (the kubelet's --streaming-connection-idle-timeout).
	IdleTimeout = 4 * time.Hour
	// StreamCreationTimeout bounds how long a SPDY client may take to
	// open its streams after the upgrade.
	StreamCreationTimeout = crirc.DefaultStreamCreationTimeout
)

// ProtocolV5 is the WebSocket subprotocol with the close signal.
const ProtocolV5 = crirc.StreamProtocolV5Name

// TerminalSize is one resize event of a TTY.
type TerminalSize = crirc.TerminalSize

// Options are an exec or attach request's query (PodExecOptions,
// PodAttachOptions).
type Options struct {
	Command   []string // exec only
	Container string
	Stdin     bool
	Stdout    bool
	Stderr    bool // always false with TTY: a terminal has one output
	TTY       bool
}

// ParseOptions reads an exec (exec true) or attach request's query. Booleans
// are Go's ("true", "1", "false", ...), as the API server's decoder reads them.
func ParseOptions(q url.Values, exec bool) (Options, error) {
	o := Options{Command: q["command"], Container: q.Get("container")}
	var errs []error
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"stdin", &o.Stdin}, {"stdout", &o.Stdout}, {"stderr", &o.Stderr}, {"tty", &o.TTY}} {
		s := q.Get(b.name)
		if s == "" {
			continue
		}
		v, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: invalid value %q: want true or false", b.name, s))
			continue
		}
		*b.dst = v
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if exec && len(o.Command) == 0 {
		return o, errors.New("you must specify at least one command for the container")
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// Streams are what a command or an attach gets: the nil ones were not asked
// for. Resize is nil without a TTY; it is closed when the client ends.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
	Resize <-chan TerminalSize
}

// ExecFunc runs the command of an exec and returns its exit code (a non-zero
// code is not an error). It returns when the command has ended or ctx has.
type ExecFunc func(ctx context.Context, s Streams) (int, error)

// AttachFunc streams a running container's output (and input) until it
// ends or ctx does.
type AttachFunc func(ctx context.Context, s Streams) error

// ServeExec upgrades r (WebSocket or SPDY), runs exec with the client's
// streams and sends the result.
func ServeExec(w http.ResponseWriter, r *http.Request, o Options, exec ExecFunc) {
	r = r.WithContext(quietCloseLogger(r.Context()))
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		serveV5(w, r, o, func(ctx context.Context, s Streams) error {
			return exitError(exec(ctx, s))
		})
		return
	}
	crirc.ServeExec(w, r, execAdapter{o: o, exec: exec}, "", "", o.Container, o.Command,
		&crirc.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, TTY: o.TTY},
		IdleTimeout, StreamCreationTimeout, crirc.SupportedStreamingProtocols)
}

// ServeAttach upgrades r (WebSocket or SPDY) and runs attach with the
// client's streams.
func ServeAttach(w http.ResponseWriter, r *http.Request, o Options, attach AttachFunc) {
	r = r.WithContext(quietCloseLogger(r.Context()))
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		serveV5(w, r, o, attach)
		return
	}
	crirc.ServeAttach(w, r, attachAdapter{o: o, attach: attach}, "", "", o.Container,
		&crirc.Options{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, TTY: o.TTY},
		IdleTimeout, StreamCreationTimeout, crirc.SupportedStreamingProtocols)
}

// exitError turns a non-zero exit code into the error cri-streaming and
// serveV5 report as NonZeroExitCode.
func exitError(code int, err error) error {
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// streams picks the asked-for streams (cri-streaming hands over channels
// that were not asked for too).
func (o Options) streams(in io.Reader, out, errw io.Writer, resize <-chan TerminalSize) Streams {
	s := Streams{TTY: o.TTY}
	if o.Stdin && in != nil {
		s.Stdin = in
	}
	if o.Stdout && out != nil {
		s.Stdout = out
	}
	if o.Stderr && errw != nil {
		s.Stderr = errw
	}
	if o.TTY {
		s.Resize = resize
	}
	return s
}

type execAdapter struct {
	o    Options
	exec ExecFunc
}

func (a execAdapter) ExecInContainer(ctx context.Context, _, _, _ string, _ []string, in io.Reader, out, errw io.WriteCloser, _ bool, resize <-chan crirc.TerminalSize, _ time.Duration) error {
	return exitError(a.exec(ctx, a.o.streams(in, nilIfNil(out), nilIfNil(errw), resize)))
}

type attachAdapter struct {
	o      Options
	attach AttachFunc
}

func (a attachAdapter) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, _ bool, resize <-chan crirc.TerminalSize) error {
	return a.attach(ctx, a.o.streams(in, nilIfNil(out), nilIfNil(errw), resize))
}

// nilIfNil keeps a nil io.WriteCloser a nil io.Writer.
func nilIfNil(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// Channels of the WebSocket protocols.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanError
	chanResize
)

// serveV5 is the WebSocket v5.channel.k8s.io server: cri-streaming's v4
// with the close signal, which wsstream handles.
func serveV5(w http.ResponseWriter, r *http.Request, o Options, run func(context.Context, Streams) error) {
	ch := func(want bool, t wsstream.ChannelType) wsstream.ChannelType {
		if want {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		chanStdin:  ch(o.Stdin, wsstream.ReadChannel),
		chanStdout: ch(o.Stdout, wsstream.WriteChannel),
		chanStderr: ch(o.Stderr, wsstream.WriteChannel),
		chanError:  wsstream.WriteChannel,
		chanResize: wsstream.ReadChannel,
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		ProtocolV5: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(IdleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return // the WebSocket handshake has answered the client
	}
	defer conn.Close()
	// An empty first message tells the client the streams are open, as
	// cri-streaming does.
	switch {
	case o.Stdout:
		_, _ = streams[chanStdout].Write(nil)
	case o.Stderr:
		_, _ = streams[chanStderr].Write(nil)
	default:
		_, _ = streams[chanError].Write(nil)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var resize chan TerminalSize
	if o.TTY {
		resize = make(chan TerminalSize)
		go decodeResize(ctx, streams[chanResize], resize)
	}
	err = run(ctx, o.streams(streams[chanStdin], streams[chanStdout], streams[chanStderr], resize))
	_, _ = streams[chanError].Write(StatusFor(err))
}

// decodeResize sends each JSON terminal size read from r to out until r
// ends or ctx does, then closes out.
func decodeResize(ctx context.Context, r io.Reader, out chan<- TerminalSize) {
	defer close(out)
	dec := json.NewDecoder(r)
	for {
		var size TerminalSize
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case out <- size:
		case <-ctx.Done():
			return
		}
	}
}

// StatusFor is the v4/v5 error-stream message for the result of a command
// or attach: a metav1.Status, with the exit code of a non-zero exit (an
// error implementing k8s.io/utils/exec.ExitError) in the cause ExitCode.
func StatusFor(err error) []byte {
	st := metav1.Status{Status: metav1.StatusSuccess}
	var exit utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		st = metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  crirc.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exit),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type: crirc.ExitCodeCauseType, Message: strconv.Itoa(exit.ExitStatus()),
			}}},
		}
	default:
		st = metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  metav1.StatusReasonInternalError,
			Message: fmt.Sprintf("Internal error occurred: error executing command in container: %v", err),
			Code:    http.StatusInternalServerError,
		}
	}
	data, _ := json.Marshal(st)
	return data
}

// quietCloseLogger is ctx with its klog logger wrapped in quietClosed.
// wsstream logs the read that the server's own Close ends as an error
// ("Error on socket receive ... use of closed network connection"), once
// per WebSocket exec or attach; the request's logger drops that one and
// passes the rest on.
func quietCloseLogger(ctx context.Context) context.Context {
	l := klog.FromContext(ctx)
	if l.GetSink() == nil {
		return ctx // logr.Discard: nothing to quiet
	}
	return klog.NewContext(ctx, l.WithSink(quietClosed{l.GetSink()}))
}

// quietClosed is a log sink that drops errors of a connection this side
// closed (net.ErrClosed) and passes everything else on.
type quietClosed struct{ logr.LogSink }

func (q quietClosed) Error(err error, msg string, kv ...any) {
	if errors.Is(err, net.ErrClosed) {
		return
	}
	q.LogSink.Error(err, msg, kv...)
}

func (q quietClosed) WithValues(kv ...any) logr.LogSink {
	return quietClosed{q.LogSink.WithValues(kv...)}
}

func (q quietClosed) WithName(name string) logr.LogSink {
	return quietClosed{q.LogSink.WithName(name)}
}
