package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
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

// servePortForward upgrades the request to the kubelet's port-forward
// protocols (agent/portforward) and connects each forwarded stream to its
// port of the pod. A pod that is not running is refused before the
// upgrade; a port nothing listens on is an error on that stream only.
func (a *Agent) servePortForward(w http.ResponseWriter, r *http.Request) {
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
	a.log.Debug("port-forward", "pod", api.KeyOf(pod))
	portforward.Serve(w, r, func(ctx context.Context, port int32) (net.Conn, error) {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("port %d: want a number from 1 to 65535", port)
		}
		dctx, cancel := context.WithTimeout(ctx, podDialTimeout)
		defer cancel()
		return a.dialPod(dctx, pod, int(port))
	})
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
