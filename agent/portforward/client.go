package portforward

import (
	"fmt"
	"net/http"
	"net/url"

	"k8s.io/client-go/rest"
	kportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"skiff.dev/skiff/agent/remotecommand"
)

// NewDialer is kubectl 1.32's port-forward connection: SPDY tunnelled over
// WebSocket first, plain SPDY when the WebSocket upgrade fails. u is the
// pod's portforward subresource (remotecommand.URL).
func NewDialer(rc *rest.Config, u *url.URL) (httpstream.Dialer, error) {
	tunnel, err := kportforward.NewSPDYOverWebsocketDialerForStreaming(u, rc)
	if err != nil {
		return nil, fmt.Errorf("port-forward websocket dialer: %w", err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(rc)
	if err != nil {
		return nil, fmt.Errorf("port-forward spdy dialer: %w", err)
	}
	plain := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	return kportforward.NewFallbackDialerForStreaming(tunnel, plain, remotecommand.ShouldFallback), nil
}
