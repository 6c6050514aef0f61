package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"skiff.dev/skiff/api"
)

// Proxy forwards the pods/log and pods/exec subresources to the agent of
// the pod's node, as kube-apiserver forwards them to the kubelet:
//
//	GET  /api/v1/namespaces/NS/pods/NAME/log   →  GET  https://NODE-IP:PORT/pods/NS/NAME/log
//	GET|POST /api/v1/namespaces/NS/pods/NAME/exec         →  https://NODE-IP:PORT/pods/NS/NAME/exec
//	GET|POST /api/v1/namespaces/NS/pods/NAME/attach       →  https://NODE-IP:PORT/pods/NS/NAME/attach
//	GET|POST /api/v1/namespaces/NS/pods/NAME/portforward  →  https://NODE-IP:PORT/pods/NS/NAME/portforward
//
// The query goes along unchanged. NODE-IP is the node's InternalIP and PORT
// its status.daemonEndpoints.kubeletEndpoint.Port. The connection is TLS
// (Config.AgentTLS): the agent's serving certificate is verified against
// the cluster CA for NODE-IP, and the API server presents its client
// certificate (kube-apiserver-kubelet-client, system:masters), which the
// agent requires; the caller's own credentials (Authorization) are not
// passed on. Log responses are passed on as
// they come (logs -f). The connection upgrade of exec, attach and
// port-forward (WebSocket or SPDY/3.1, with the subprotocol headers:
// agent/remotecommand, agent/portforward) is passed on too, and after the
// agent's 101 the proxy copies bytes both ways until either side closes:
// the agent speaks every protocol kubectl does, so the proxy translates
// nothing (kube-apiserver instead terminates WebSocket v5 and the
// port-forward tunnel and speaks SPDY to the kubelet).
//
// An agent listening on loopback only (the agent inside `skiff up`) is
// reached through 127.0.0.1 when its InternalIP is an address of this
// machine.
type Proxy struct {
	reg *Registry
	tls *tls.Config // nil: no way to the agents
	rp  *httputil.ReverseProxy
}

// ProxyHandler returns the handler of pods/log and pods/exec. The caller
// has authenticated the request; the handler reads the pod and its node
// from reg and forwards to the node's agent over TLS with tlsCfg (the
// cluster CA as RootCAs, the API server's client certificate). A nil
// tlsCfg answers 503: this server has no credential towards agents.
func ProxyHandler(reg *Registry, tlsCfg *tls.Config) *Proxy {
	p := &Proxy{reg: reg, tls: tlsCfg}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				return conn, nil
			}
			host, port, _ := net.SplitHostPort(addr)
			if IsLocalAddress(host) {
				if c, lerr := dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port)); lerr == nil {
					return c, nil
				}
			}
			return nil, err
		},
		// HTTP/1.1 (a TLS config of our own, no ForceAttemptHTTP2): the
		// agents' upgrades (exec, port-forward) need it.
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // ServeHTTP sets the outgoing request up
		Transport:     tr,
		FlushInterval: -1, // logs -f: pass every write on at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, api.NewStatusError(http.StatusBadGateway, api.ReasonServiceUnavail,
				fmt.Sprintf("cannot reach the agent at %s: %v", r.URL.Host, err)))
		},
	}
	return p
}

// ServeHTTP forwards r, whose path is .../namespaces/NS/pods/NAME/{log,exec}.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := &requestInfo{}
	if err := parseRequest(r, info); err != nil {
		writeError(w, err)
		return
	}
	target, err := p.agentURL(r.Context(), info)
	if errors.Is(err, errNoLogsYet) && r.Method == http.MethodGet {
		// kube-apiserver answers the log of a pod not yet on a node with
		// an empty stream (LogLocation's empty location), so `kubectl logs
		// -l app=X` of a Deployment with a Pending replica shows the rest.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// The streaming subresources take GET (WebSocket) and POST (SPDY), as
	// kube-apiserver's do; the upgrade goes through to the agent.
	streaming := info.sub == "exec" || info.sub == "attach" || info.sub == "portforward"
	if r.Method != http.MethodGet && (!streaming || r.Method != http.MethodPost) {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			fmt.Sprintf("method %s is not supported on pods/%s", r.Method, info.sub)))
		return
	}
	out := r.Clone(r.Context())
	out.URL = target
	out.URL.RawQuery = r.URL.RawQuery
	out.Host = target.Host
	if !p.prepare(w, out) {
		return
	}
	p.rp.ServeHTTP(w, out)
}

// agentURL finds where the agent of the pod's node serves this request.
func (p *Proxy) agentURL(ctx context.Context, info *requestInfo) (*url.URL, error) {
	if info.kind != podKind || info.name == "" || (info.sub != "log" && info.sub != "exec" && info.sub != "attach" && info.sub != "portforward") {
		return nil, notFoundPath()
	}
	o, err := p.reg.Get(ctx, podKind, info.namespace, info.name)
	if err != nil {
		return nil, err
	}
	pod := o.(*api.Pod)
	if pod.Spec.NodeName == "" {
		if info.sub == "log" {
			return nil, errNoLogsYet
		}
		return nil, api.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	no, err := p.reg.Get(ctx, nodeKind, "", pod.Spec.NodeName)
	if err != nil {
		if api.IsNotFound(err) {
			return nil, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail,
				fmt.Sprintf("node %s of pod %s is not registered", pod.Spec.NodeName, pod.Name))
		}
		return nil, err
	}
	node := no.(*api.Node)
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == "InternalIP" && a.Address != "" {
			ip = a.Address
			break
		}
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if ip == "" || port == 0 {
		return nil, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail,
			fmt.Sprintf("node %s does not serve logs and exec (no InternalIP or daemon port in its status)", node.Name))
	}
	return &url.URL{
		Scheme: "https",
		Host:   net.JoinHostPort(ip, strconv.Itoa(int(port))),
		Path:   "/pods/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + info.sub,
	}, nil
}

// prepare readies an outgoing request to an agent: the caller's own
// credentials stay behind (the API server authenticates with its client
// certificate). Without AgentTLS it answers 503 and returns false.
func (p *Proxy) prepare(w http.ResponseWriter, out *http.Request) bool {
	if p.tls == nil {
		writeError(w, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail,
			"this API server has no client certificate towards the agents (apiserver.Config.AgentTLS)"))
		return false
	}
	out.Header.Del("Authorization")
	out.Header.Del("Cookie")
	return true
}

// errNoLogsYet: the pod of a log request is not on a node yet.
var errNoLogsYet = errors.New("pod is not on a node yet")

// IsLocalAddress reports whether ip is an address of this machine
// (loopback included).
func IsLocalAddress(ip string) bool {
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return false
	}
	if parsed.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(parsed) {
			return true
		}
	}
	return false
}

var _ http.Handler = (*Proxy)(nil)
