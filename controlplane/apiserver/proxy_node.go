package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"skiff.dev/skiff/api"
)

// The nodes/proxy subresource, as kube-apiserver's: a request to
//
//	/api/v1/nodes/NAME/proxy/PATH   →   https://NODE-IP:PORT/PATH
//
// reaches the agent of node NAME over TLS with the API server's client
// certificate (proxy.go), whatever PATH is;
// the agent decides what it serves. `skiff gpu fault` uses it:
//
//	POST /api/v1/nodes/NAME/proxy/gpus/INDEX/fault?xid=79   (or ?clear=true)

const nodeProxyPrefix = "/api/v1/nodes/"

// nodeProxyPath splits /api/v1/nodes/NAME/proxy/PATH into NAME and /PATH.
func nodeProxyPath(p string) (name, rest string, ok bool) {
	tail, ok := strings.CutPrefix(p, nodeProxyPrefix)
	if !ok {
		return "", "", false
	}
	name, rest, ok = strings.Cut(tail, "/")
	if !ok || name == "" {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest, "proxy")
	if !ok || (rest != "" && rest[0] != '/') {
		return "", "", false
	}
	if rest == "" {
		rest = "/"
	}
	return name, rest, true
}

// ServeNode forwards r to the agent of node name, at path, as the
// nodes/NAME/proxy subresource does (the dashboard's sequence view reads
// the agents' device call logs with it).
func (p *Proxy) ServeNode(w http.ResponseWriter, r *http.Request, name, path string) {
	p.serveNode(w, r, name, path)
}

// serveNode forwards r to the agent of node name, at path.
func (p *Proxy) serveNode(w http.ResponseWriter, r *http.Request, name, path string) {
	no, err := p.reg.Get(r.Context(), nodeKind, "", name)
	if err != nil {
		writeError(w, err)
		return
	}
	host, err := agentHost(no.(*api.Node))
	if err != nil {
		writeError(w, err)
		return
	}
	out := r.Clone(r.Context())
	out.URL = &url.URL{Scheme: "https", Host: host, Path: path, RawQuery: r.URL.RawQuery}
	out.Host = host
	if !p.prepare(w, out) {
		return
	}
	p.rp.ServeHTTP(w, out)
}

// agentHost is where a node's agent listens: its InternalIP and the port
// in status.daemonEndpoints.
func agentHost(node *api.Node) (string, error) {
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == "InternalIP" && a.Address != "" {
			ip = a.Address
			break
		}
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if ip == "" || port == 0 {
		return "", api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail,
			fmt.Sprintf("node %s serves no agent endpoint (no InternalIP or daemon port in its status)", node.Name))
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(port))), nil
}
