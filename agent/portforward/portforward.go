// Package portforward is the wire protocol of `skiff port-forward`: how
// one local TCP connection reaches a port of a pod, through the API server
// and the agent of the pod's node.
//
// # The connection
//
// For every local connection the CLI accepts, it sends
//
//	POST /api/v1/namespaces/NS/pods/NAME/portforward?port=80
//	Connection: Upgrade
//	Upgrade: skiff-portforward
//	Authorization: Bearer TOKEN
//
// to the API server, which checks the token and the pod and forwards the
// request to the agent of the pod's node (POST /pods/NS/NAME/portforward,
// same query), as it forwards exec (agent/remotecommand). The agent first
// connects to the pod's port; only when that works does it answer
// "101 Switching Protocols", so a closed port is an ordinary HTTP error
// with a Kubernetes Status body. After the 101 the connection carries the
// raw bytes of the pod connection, unframed, in both directions.
//
// # Invariants
//
//   - One upgraded connection per forwarded TCP connection: no
//     multiplexing, so nothing in between needs to understand the stream.
//   - The stream ends as a whole: when either side closes (or reaches
//     EOF), both connections are closed. A half-close is not carried
//     (the API server's upgrade proxy cannot carry it either), which suits
//     request-response protocols such as HTTP.
//
// Kubernetes multiplexes all ports of one kubectl port-forward over one
// SPDY or WebSocket connection; skiff's one-connection-per-connection
// protocol is slower to open but has nothing to explain.
package portforward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"skiff.dev/skiff/agent/remotecommand"
)

// Protocol is the Upgrade header value of a port-forward connection.
const Protocol = "skiff-portforward"

// ParsePort reads the port query parameter (1 to 65535).
func ParsePort(q url.Values) (int, error) {
	s := q.Get("port")
	if s == "" {
		return 0, errors.New("port-forward needs a port (?port=N)")
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	return p, nil
}

// Dial opens a port-forward connection to port of the pod whose
// portforward subresource is path (client.PathFor(pods, NS, NAME,
// "portforward")) on server. An answer other than 101 is returned as
// *api.StatusError. hc nil means http.DefaultClient.
func Dial(ctx context.Context, hc *http.Client, server, token, path string, port int) (io.ReadWriteCloser, error) {
	return remotecommand.DialUpgrade(ctx, hc, server, token, path, url.Values{"port": {strconv.Itoa(port)}}, Protocol, "port-forward")
}

// Splice copies a to b and b to a until either side ends or ctx does, then
// closes both and returns the bytes copied each way.
func Splice(ctx context.Context, a, b io.ReadWriteCloser) (aToB, bToA int64) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bToA, _ = io.Copy(a, b)
		closeBoth()
	}()
	aToB, _ = io.Copy(b, a)
	closeBoth()
	wg.Wait()
	return aToB, bToA
}
