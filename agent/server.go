package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
	"skiff.dev/skiff/runtime"
)

// The agent's HTTP endpoint, the kubelet's port 10250 in a skiff cluster.
// The API server forwards `skiff logs` and `skiff exec` here, to the agent
// of the pod's node (it finds the port in the Node's
// status.daemonEndpoints.kubeletEndpoint.Port):
//
//	GET  /pods/{ns}/{name}/log?container=C&follow=true&tailLines=N&previous=true
//	GET|POST /pods/{ns}/{name}/exec?command=...&command=...&container=C&stdin=true&stdout=true&stderr=true&tty=true
//	GET|POST /pods/{ns}/{name}/attach?container=C&stdin=true&stdout=true&tty=true   (exec.go)
//	GET|POST /pods/{ns}/{name}/portforward   (portforward.go)
//	POST /gpus/{index}/fault?xid=79 | ?clear=true   (simulated GPUs, gpufault.go)
//	GET  /stats/summary   (resource usage, the kubelet's Summary API: stats.go)
//	GET  /devices/calls   (the device manager's gRPC calls, for the dashboard: devicecalls.go)
//	GET  /healthz
//
// The server speaks TLS only (Config.TLS: the node's serving certificate,
// SANs its addresses) and requires a client certificate of the cluster
// CA; every request but /healthz must come from the API server: CN
// kube-apiserver-kubelet-client or group system:masters (the kubelet's
// x509 authentication, with a fixed authorization). Anyone else gets 401
// without a certificate and 403 with one (a node's, say).
// Exec, attach and port-forward upgrade the connection to the kubelet's
// streaming protocols (WebSocket or SPDY: agent/remotecommand,
// agent/portforward). Errors are Kubernetes Status objects,
// so the API server passes them on unchanged and the CLI prints them as
// it prints any other.

// Handler is the agent's HTTP handler (authentication included).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pods/{ns}/{name}/log", a.serveLog)
	for _, m := range []string{"GET", "POST"} { // streaming: exec.go, portforward.go
		mux.HandleFunc(m+" /pods/{ns}/{name}/exec", a.serveExec)
		mux.HandleFunc(m+" /pods/{ns}/{name}/attach", a.serveAttach)
		mux.HandleFunc(m+" /pods/{ns}/{name}/portforward", a.servePortForward)
	}
	mux.HandleFunc("POST /gpus/{index}/fault", a.serveGPUFault)    // gpufault.go
	mux.HandleFunc("GET /stats/summary", a.serveStatsSummary)      // stats.go
	mux.HandleFunc("GET "+DeviceCallsPath, a.serveDeviceCalls)     // devicecalls.go
	mux.HandleFunc("GET "+api.DCGMMetricsPath, a.serveDCGMMetrics) // dcgmexporter.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			io.WriteString(w, "ok")
			return
		}
		if err := fromAPIServer(r); err != nil {
			writeStatus(w, err)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// fromAPIServer checks that r carries a verified client certificate of
// the API server (CN kube-apiserver-kubelet-client, or group
// system:masters).
func fromAPIServer(r *http.Request) *api.StatusError {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized")
	}
	user, groups := pki.Identity(r.TLS.VerifiedChains[0][0])
	if user == pki.APIServerKubeletClient || slices.Contains(groups, pki.MastersGroup) {
		return nil
	}
	return api.NewStatusError(http.StatusForbidden, api.ReasonForbidden,
		fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=proxy): only the API server may call the agent", user, strings.ToLower(r.Method)))
}

// Listen opens the agent's HTTPS socket on Config.Listen, so that its port
// is known before the node registers. Run calls it when it was not called;
// with no Config.Listen there is no server.
func (a *Agent) Listen() error {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.ln != nil || a.cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("agent server: listen on %s: %w", a.cfg.Listen, err)
	}
	a.ln = ln
	return nil
}

// Addr is the address the agent's server listens on ("" without one).
func (a *Agent) Addr() string {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.ln == nil {
		return ""
	}
	return a.ln.Addr().String()
}

// port is the listening port, for the Node's daemonEndpoints (0: none).
func (a *Agent) port() int32 {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.ln == nil {
		return 0
	}
	return int32(a.ln.Addr().(*net.TCPAddr).Port)
}

// serve runs the HTTP server until ctx ends. Log follows and execs in
// flight end with ctx (their request contexts derive from it).
func (a *Agent) serve(ctx context.Context) {
	a.srvMu.Lock()
	ln := a.ln
	a.srvMu.Unlock()
	if ln == nil {
		return
	}
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// HTTP/1.1 only: exec and port-forward upgrade the connection.
		TLSConfig:    a.cfg.TLS.Clone(),
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	a.log.Info("agent server listening", "addr", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("agent server stopped", "err", err)
	}
	<-done
}

// podContainer finds the pod (in the agent's cache: it must be bound to
// this node) and the container a request names, defaulting to the only
// one.
func (a *Agent) podContainer(r *http.Request, name string) (*api.Pod, string, error) {
	ns, podName := r.PathValue("ns"), r.PathValue("name")
	o, ok := a.pods.Get(ns, podName)
	if !ok {
		return nil, "", api.NewNotFound(api.MustKindOf(&api.Pod{}), podName)
	}
	pod := o.(*api.Pod)
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	switch {
	case name == "" && len(pod.Spec.Containers) == 1:
		name = pod.Spec.Containers[0].Name
	case name == "":
		return nil, "", api.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", podName, names))
	case !slices.Contains(names, name) && !slices.ContainsFunc(pod.Spec.EphemeralContainers, func(ec api.EphemeralContainer) bool { return ec.Name == name }):
		return nil, "", api.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, podName))
	}
	return pod, name, nil
}

// containerAttempts returns the runtime containers of one pod container,
// newest attempt first.
func (a *Agent) containerAttempts(ctx context.Context, pod *api.Pod, name string) ([]runtime.ContainerStatus, error) {
	cs, err := a.rt.ListContainers(ctx, map[string]string{runtime.LabelPodUID: pod.UID, runtime.LabelContainerName: name})
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("list containers of pod %s: %w", api.KeyOf(pod), err))
	}
	attempt := func(c runtime.ContainerStatus) int {
		n, _ := strconv.Atoi(c.Labels[runtime.LabelAttempt])
		return n
	}
	slices.SortFunc(cs, func(x, y runtime.ContainerStatus) int { return attempt(y) - attempt(x) })
	return cs, nil
}

// waitingReason is the reason a container with no runtime container yet
// is waiting, from the pod status.
func waitingReason(pod *api.Pod, name string) string {
	for _, list := range [][]api.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if s.Name == name && s.State.Waiting != nil && s.State.Waiting.Reason != "" {
				return s.State.Waiting.Reason
			}
		}
	}
	return "ContainerCreating"
}

func (a *Agent) serveLog(w http.ResponseWriter, r *http.Request) {
	opts, err := parseLogOptions(r.URL.Query()) // logoptions.go
	if err != nil {
		writeStatus(w, api.NewBadRequest("log options: "+err.Error()))
		return
	}
	follow, previous := opts.follow, opts.previous
	pod, name, err := a.podContainer(r, opts.container)
	if err != nil {
		writeStatus(w, err)
		return
	}
	cs, err := a.containerAttempts(r.Context(), pod, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	var c runtime.ContainerStatus
	switch {
	case previous && len(cs) < 2:
		writeStatus(w, api.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod.Name)))
		return
	case previous:
		c, follow = cs[1], false
	case len(cs) == 0:
		writeStatus(w, api.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", name, pod.Name, waitingReason(pod, name))))
		return
	default:
		c = cs[0]
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var out io.Writer = &flushWriter{w: w, rc: http.NewResponseController(w)}
	if opts.limitBytes > 0 {
		out = &limitWriter{w: out, n: opts.limitBytes}
	}
	if err := a.rt.Logs(r.Context(), c.ID, runtime.LogOptions{Follow: follow, Tail: opts.tail}, out); err != nil && !errors.Is(err, errLogLimit) && r.Context().Err() == nil {
		// The status line is sent: all that can be done is to stop.
		a.log.Debug("logs", "pod", api.KeyOf(pod), "container", name, "err", err)
	}
}

func boolQuery(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

// flushWriter sends each write at once (logs -f).
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// writeStatus is api.WriteStatus: err as a Kubernetes Status.
func writeStatus(w http.ResponseWriter, err error) { api.WriteStatus(w, err) }

// closeListener closes a socket Listen opened when Run fails before serving.
func (a *Agent) closeListener() {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.ln != nil {
		a.ln.Close()
		a.ln = nil
	}
}
