package kubectl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	kportforward "k8s.io/client-go/tools/portforward"
	kremotecommand "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/outpair"
)

// The client side of exec, attach and port-forward: the connections
// kubectl 1.32 opens to a pod's subresources, which the API server passes
// on to the node's agent (agent/remotecommand, agent/portforward serve
// them).

// RESTConfig is client-go's view of a skiff client config: the server,
// the bearer token and the TLS material. The streaming clients of client-go
// (tools/remotecommand, tools/portforward) take one.
func RESTConfig(cfg client.Config) *rest.Config {
	host := cfg.Server
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = client.UserAgent("skiff")
	}
	return &rest.Config{
		Host:        host,
		BearerToken: cfg.Token,
		UserAgent:   ua,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cfg.CAData,
			CertData: cfg.CertData,
			KeyData:  cfg.KeyData,
		},
	}
}

// URL is the address of a pod subresource (client.PathFor(..., "exec"))
// with query on the server of rc.
func URL(rc *rest.Config, path string, query url.Values) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(rc.Host, "/") + path)
	if err != nil {
		return nil, fmt.Errorf("stream url: %w", err)
	}
	u.RawQuery = query.Encode()
	return u, nil
}

// ShouldFallback is kubectl's rule for trying SPDY when the WebSocket
// upgrade was refused (an API server or proxy without WebSocket support).
func ShouldFallback(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// NewExecutor is kubectl 1.32's exec and attach client: WebSocket
// (v5.channel.k8s.io and older) first, SPDY (v4.channel.k8s.io) when the
// WebSocket upgrade fails. Stdout and Stderr may be one writer.
func NewExecutor(rc *rest.Config, u *url.URL) (kremotecommand.Executor, error) {
	ws, err := kremotecommand.NewWebSocketExecutor(rc, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("websocket executor: %w", err)
	}
	sp, err := kremotecommand.NewSPDYExecutor(rc, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("spdy executor: %w", err)
	}
	fb, err := kremotecommand.NewFallbackExecutor(ws, sp, ShouldFallback)
	if err != nil {
		return nil, err
	}
	return pairedExecutor{fb}, nil
}

// pairedExecutor lets stdout and stderr be one writer: client-go copies
// the two streams at once (internal/outpair).
type pairedExecutor struct{ kremotecommand.Executor }

func (e pairedExecutor) Stream(o kremotecommand.StreamOptions) error {
	o.Stdout, o.Stderr = outpair.Pair(o.Stdout, o.Stderr)
	//lint:ignore SA1019 passes the deprecated call on unchanged
	return e.Executor.Stream(o)
}

func (e pairedExecutor) StreamWithContext(ctx context.Context, o kremotecommand.StreamOptions) error {
	o.Stdout, o.Stderr = outpair.Pair(o.Stdout, o.Stderr)
	return e.Executor.StreamWithContext(ctx, o)
}

// ExecOptions are an exec or attach request (PodExecOptions,
// PodAttachOptions), as agent/remotecommand.Options reads them back on
// the node: the same fields, so one converts to the other.
type ExecOptions struct {
	Command   []string // exec only
	Container string
	Stdin     bool
	Stdout    bool
	Stderr    bool // always false with TTY: a terminal has one output
	TTY       bool
}

// Query is the exec (command set) or attach request's query for o, in
// PodExecOptions' names.
func (o ExecOptions) Query() url.Values {
	q := url.Values{}
	for _, c := range o.Command {
		q.Add("command", c)
	}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	for name, v := range map[string]bool{"stdin": o.Stdin, "stdout": o.Stdout, "stderr": o.Stderr, "tty": o.TTY} {
		if v {
			q.Set(name, "true")
		}
	}
	return q
}

// NewPortForwardDialer is kubectl 1.32's port-forward connection: SPDY tunnelled over
// WebSocket first, plain SPDY when the WebSocket upgrade fails. u is the
// pod's portforward subresource (URL).
func NewPortForwardDialer(rc *rest.Config, u *url.URL) (httpstream.Dialer, error) {
	tunnel, err := kportforward.NewSPDYOverWebsocketDialerForStreaming(u, rc)
	if err != nil {
		return nil, fmt.Errorf("port-forward websocket dialer: %w", err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(rc)
	if err != nil {
		return nil, fmt.Errorf("port-forward spdy dialer: %w", err)
	}
	plain := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	return kportforward.NewFallbackDialerForStreaming(tunnel, plain, ShouldFallback), nil
}
