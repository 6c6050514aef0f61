package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/portforward"
	"skiff.dev/skiff/api"
)

// podNetNS is implemented by pod networks that give pods a network
// namespace of their own (network.Node): NetNSPath is where pod uid's
// namespace is, or would be (a host-network pod has none).
type podNetNS interface {
	NetNSPath(uid string) string
}

// podDialTimeout bounds the connect to a pod's port.
const podDialTimeout = 5 * time.Second

// servePortForward connects to a port of a pod and, when that works,
// upgrades the request's connection and copies bytes both ways until
// either side closes (agent/portforward).
func (a *Agent) servePortForward(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), portforward.Protocol) {
		writeStatus(w, api.NewBadRequest("port-forward needs a connection upgrade (Connection: Upgrade, Upgrade: "+portforward.Protocol+")"))
		return
	}
	port, err := portforward.ParsePort(r.URL.Query())
	if err != nil {
		writeStatus(w, api.NewBadRequest(err.Error()))
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	o, ok := a.pods.Get(ns, name)
	if !ok {
		writeStatus(w, api.NewNotFound(api.MustKindOf(&api.Pod{}), name))
		return
	}
	pod := o.(*api.Pod)
	if pod.Status.Phase != api.PodRunning {
		writeStatus(w, api.NewBadRequest(fmt.Sprintf("unable to forward port because pod is not running. Current status=%s", pod.Status.Phase)))
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), podDialTimeout)
	target, err := a.dialPod(dctx, pod, port)
	cancel()
	if err != nil {
		writeStatus(w, api.NewStatusError(http.StatusBadGateway, api.ReasonServiceUnavail,
			fmt.Sprintf("error forwarding port %d to pod %s: %v", port, pod.Name, err)))
		return
	}
	defer target.Close()

	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeStatus(w, api.NewInternal(fmt.Errorf("port-forward: %w", err)))
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", portforward.Protocol); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	// Bytes the client sent after its request, already buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		buf, _ := brw.Reader.Peek(n)
		if _, err := target.Write(buf); err != nil {
			return
		}
	}
	a.log.Debug("port-forward", "pod", api.KeyOf(pod), "port", port)
	portforward.Splice(r.Context(), conn, target)
}

// dialPod connects to port of pod. A pod with a network namespace of its
// own is reached on 127.0.0.1 inside that namespace, as the kubelet does:
// this works whether or not the node routes to pod IPs (a test's node in a
// namespace of its own), and reaches servers bound to the pod's loopback.
// Other pods (host network, or no pod network) share the node's
// namespace: 127.0.0.1 there.
func (a *Agent) dialPod(ctx context.Context, pod *api.Pod, port int) (net.Conn, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if nn, ok := a.cfg.Network.(podNetNS); ok && !pod.Spec.HostNetwork && pod.UID != "" {
		path := nn.NetNSPath(pod.UID)
		if _, err := os.Stat(path); err != nil {
			// Never fall back to the node's own localhost: that would
			// forward to the node's services, not the pod's.
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("network namespace of pod %s not found (the pod has no network yet, or it ended)", api.KeyOf(pod))
			}
			return nil, fmt.Errorf("network namespace of pod %s: %w", api.KeyOf(pod), err)
		}
		return network.DialNetNS(ctx, path, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
