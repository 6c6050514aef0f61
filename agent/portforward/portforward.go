// Package portforward is the server side of `kubectl port-forward` on a
// skiff node: the protocols the kubelet speaks, so real kubectl and
// client-go's tools/portforward (which `skiff port-forward` uses too) reach
// a pod's ports through the API server and the agent of the pod's node.
//
// # The connection
//
// The client sends one upgrade request for the whole port-forward:
//
//	GET or POST /api/v1/namespaces/NS/pods/NAME/portforward
//	Connection: Upgrade
//	Upgrade: websocket                                  (or SPDY/3.1)
//	Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io (or X-Stream-Protocol-Version: portforward.k8s.io)
//
// The API server checks the credentials and the pod and passes the request
// on, upgrade and all, to the agent (/pods/NS/NAME/portforward). After the
// 101 the connection is SPDY/3.1: for every local connection the client
// opens two SPDY streams with headers streamType (data, error), port and a
// requestID that pairs them; the agent connects to the port inside the
// pod's network namespace and copies bytes between that connection and the
// data stream, and writes what went wrong, if anything, on the error stream.
// Many local connections and ports share one upgraded connection.
//
// # Protocols
//
//   - WebSocket SPDY/3.1+portforward.k8s.io (kubectl 1.31 and later): the
//     same SPDY/3.1 session carried in binary WebSocket messages, because
//     WebSocket, unlike SPDY, passes through every HTTP proxy.
//   - SPDY/3.1 portforward.k8s.io: kubectl's fallback, and older clients.
//   - WebSocket v4.channel.k8s.io and portforward.k8s.io (?ports=80,443):
//     the older channel protocol, two channels (data, error) per port, one
//     connection per forwarded connection (the Python client's).
//
// # Which code does it
//
// SPDY and the channel protocol are k8s.io/cri-streaming's ServePortForward,
// the kubelet's streaming server. The tunnelled WebSocket is unwrapped here
// with gorilla/websocket and client-go's TunnelingConnection (the net.Conn
// over WebSocket messages kubectl itself uses) and handed to the same SPDY
// server. In Kubernetes the API server unwraps the tunnel
// (k8s.io/apiserver's streamtunnel) and speaks plain SPDY to the kubelet;
// skiff's API server passes the upgrade through, so the agent unwraps it.
package portforward

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	kportforward "k8s.io/client-go/tools/portforward"
	cripf "k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Timeouts of a connection, the kubelet's defaults.
const (
	IdleTimeout           = 4 * time.Hour
	StreamCreationTimeout = 30 * time.Second
)

// TunnelProtocol is the WebSocket subprotocol that carries SPDY.
const TunnelProtocol = cripf.WebsocketsSPDYTunnelingPortForwardV1

// DialFunc connects to port of the pod. Its error is sent to the client on
// the connection's error stream.
type DialFunc func(ctx context.Context, port int32) (net.Conn, error)

// Serve upgrades r and forwards each of the client's streams to the pod
// port it names, through dial, until the connection ends.
func Serve(w http.ResponseWriter, r *http.Request, dial DialFunc) {
	f := forwarder{dial: dial}
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		serveTunnel(w, r, f)
		return
	}
	var opts *cripf.V4Options
	if wsstream.IsWebSocketRequest(r) {
		var err error
		if opts, err = cripf.NewV4Options(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	cripf.ServePortForward(w, r, f, "", "", opts, IdleTimeout, StreamCreationTimeout, cripf.SupportedProtocols)
}

// serveTunnel accepts the WebSocket, then serves SPDY inside it.
func serveTunnel(w http.ResponseWriter, r *http.Request, f forwarder) {
	up := gwebsocket.Upgrader{Subprotocols: []string{TunnelProtocol}}
	ws, err := up.Upgrade(w, r, nil) // answers the client itself on failure
	if err != nil {
		return
	}
	conn := kportforward.NewTunnelingConnection("agent", ws)
	defer conn.Close()
	// Inside the tunnel the client starts SPDY at once, without an HTTP
	// upgrade of its own: give the SPDY server the request it would have
	// sent and a response writer whose Hijack is the tunnel.
	inner := r.Clone(r.Context())
	inner.Header = http.Header{}
	inner.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	inner.Header.Set(httpstream.HeaderUpgrade, spdy.HeaderSpdy31)
	inner.Header.Set(httpstream.HeaderProtocolVersion, cripf.ProtocolV1Name)
	cripf.ServePortForward(&tunnelWriter{conn: conn}, inner, f, "", "", nil, IdleTimeout, StreamCreationTimeout, cripf.SupportedProtocols)
}

// tunnelWriter is the http.ResponseWriter of the SPDY server inside a
// tunnel: the 101 it writes is dropped (the WebSocket upgrade was the
// client's 101) and Hijack hands over the tunnel.
type tunnelWriter struct {
	conn   net.Conn
	header http.Header
}

func (t *tunnelWriter) Header() http.Header {
	if t.header == nil {
		t.header = http.Header{}
	}
	return t.header
}
func (t *tunnelWriter) Write(p []byte) (int, error) { return len(p), nil }
func (t *tunnelWriter) WriteHeader(int)             {}
func (t *tunnelWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return t.conn, bufio.NewReadWriter(bufio.NewReader(t.conn), bufio.NewWriter(t.conn)), nil
}

// forwarder is cri-streaming's PortForwarder over a DialFunc.
type forwarder struct{ dial DialFunc }

// PortForward connects to port and copies both ways. The client's end of
// input (it half-closes the data stream) is passed on as a half-close of
// the pod connection, so the pod can still answer; the forward ends when
// the pod closes its side, or ctx ends. cri-streaming writes a returned
// error on the error stream.
func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	target, err := f.dial(ctx, port)
	if err != nil {
		return fmt.Errorf("error forwarding port %d to pod: %w", port, err)
	}
	defer target.Close()
	stop := context.AfterFunc(ctx, func() {
		target.Close()
		stream.Close()
	})
	defer stop()
	go func() {
		// Ends with the client's end of input, or when the client removes
		// the stream (it does once the pod's side has ended), or with ctx.
		_, _ = io.Copy(target, stream)
		if cw, ok := target.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			target.Close()
		}
	}()
	_, _ = io.Copy(stream, target)
	// The pod is done. Not waiting for the copy above is deliberate: the
	// client removes the stream only after cri-streaming has closed the
	// error stream, which it does when this returns.
	return nil
}
