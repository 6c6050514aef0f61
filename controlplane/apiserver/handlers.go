package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// requestInfo is what a path and method mean, as kube-apiserver's RequestInfo.
type requestInfo struct {
	verb      string // get list watch create update patch delete
	kind      *api.Kind
	namespace string
	name      string
	sub       string             // status, binding, scale, trace, finalize
	served    *api.ServedVersion // a further served version of kind (versions.go); nil: stored
}

// resource is the metrics label: "pods" or "pods/status". Only known
// names are used, so a client cannot blow up the label set.
func (ri *requestInfo) resource() string {
	if ri == nil || ri.kind == nil {
		return ""
	}
	if ri.sub != "" {
		if !knownSub(ri.kind, ri.sub) {
			return ri.kind.Resource + "/other"
		}
		return ri.kind.Resource + "/" + ri.sub
	}
	return ri.kind.Resource
}

// verbLabel is the metrics label of a verb: a known one or "other".
func verbLabel(v string) string {
	switch v {
	case "get", "list", "watch", "create", "update", "patch", "delete", "head", "options":
		return v
	}
	return "other"
}

func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		info := &requestInfo{verb: strings.ToLower(r.Method)}
		s.serve(rec, r, info)
		d := time.Since(start)
		s.metrics.ObserveRequest(verbLabel(info.verb), info.resource(), rec.code, d)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "query", loggedQuery(r.URL), // logquery.go
			"verb", verbLabel(info.verb), "code", rec.code, "duration", d, "remote", r.RemoteAddr)
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/livez":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
		return
	case "/version":
		writeJSON(w, http.StatusOK, s.versionInfo()) // version.go
		return
	}
	if s.cfg.Dashboard != nil && strings.HasPrefix(r.URL.Path, DashboardPrefix) {
		// The web dashboard authenticates its own session cookie
		// (dashboard/); its event stream ends when the server shuts down.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.watchCtx, cancel)()
		s.cfg.Dashboard.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	u, ok := s.authenticate(r) // authn.go
	if !ok {
		writeError(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized, "Unauthorized"))
		return
	}
	u, err := s.impersonate(r, u) // impersonate.go: kubectl --as
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := WithUser(r.Context(), u)
	// Limits under load (inflight.go), as kube-apiserver's filters after
	// authentication: long-running requests pass; the others take an
	// in-flight slot (or get 429 at once) and run under RequestTimeout.
	ri, long := classify(r)
	if long {
		s.serveAPI(w, r.WithContext(ctx), info)
		return
	}
	release, ok := s.inflight.acquire(r.Method)
	if !ok {
		*info = ri
		writeError(w, tooManyRequests())
		return
	}
	s.serveShort(w, r, ctx, info, ri, release)
}

// serveAPI serves an authenticated request.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if !s.checkAuthorized(w, r) { // authz.go
		return
	}
	if s.serveMetricsAPI(w, r) || s.serveCustomMetricsAPI(w, r) || s.serveVisibilityAPI(w, r) { // metrics.k8s.io (metrics_api.go), visibility.kueue.x-k8s.io (visibility.go)
		return
	}
	if r.URL.Path == "/metrics" {
		s.metrics.Handler().ServeHTTP(w, r)
		return
	}
	if s.serveSnapshot(w, r) || s.serveDiscovery(w, r) || s.serveOpenAPI(w, r) { // snapshot.go, discovery.go, openapi.go
		return
	}
	if strings.HasPrefix(r.URL.Path, DashboardLoginCodePrefix) && s.cfg.Dashboard != nil {
		s.cfg.Dashboard.ServeHTTP(w, r) // a one-time login code for this user (dashboard/)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/skiff/") && s.cfg.Skiff != nil {
		s.cfg.Skiff.ServeHTTP(w, r)
		return
	}
	if name, path, ok := nodeProxyPath(r.URL.Path); ok {
		info.kind, info.name, info.sub = nodeKind, name, "proxy"
		s.proxy.serveNode(w, r, name, path) // to the node's agent (proxy_node.go)
		return
	}
	if err := parseRequest(r, info); err != nil {
		writeError(w, err)
		return
	}
	if !acceptsJSON(r) { // protobuf.go
		writeError(w, notAcceptable())
		return
	}
	if query(r).Has("dryRun") { // dryrun.go
		ctx, err := dryRunContext(r, info)
		if err != nil {
			writeError(w, err)
			return
		}
		r = r.WithContext(ctx)
	}
	if info.kind.CreateOnly {
		s.serveReview(w, r, info) // selfsubject.go
		return
	}
	if info.kind == podKind && (info.sub == "log" || info.sub == "exec" || info.sub == "attach" || info.sub == "portforward") {
		// To the agent of the pod's node (proxy.go). Like a watch, a
		// followed log is long-lived: server shutdown ends it.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.watchCtx, cancel)
		defer stop()
		s.proxy.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	s.serveResource(w, r, info)
}

// parseRequest resolves /api/v1/... and /apis/GROUP/VERSION/... paths:
//
//	{resource}                                   list all / create cluster-scoped
//	{resource}/{name}[/{sub}]                    cluster-scoped object
//	namespaces/{ns}/{resource}[/{name}[/{sub}]]  namespaced
//
// into info's kind, namespace, name, subresource and verb (resourceVerb).
func parseRequest(r *http.Request, info *requestInfo) error {
	var buf [8]string
	group, version, parts, ok := apiPath(r.URL.Path, &buf)
	if !ok || version == "" {
		return notFoundPath() // "" would be any version to KindForResource
	}
	if parts[0] == "namespaces" && len(parts) >= 3 {
		if k := api.KindForResource(group, version, parts[2]); k != nil && k.Namespaced {
			info.namespace, parts = parts[1], parts[2:]
		}
	}
	k := api.KindForResource(group, version, parts[0])
	if k == nil || len(parts) > 3 {
		return notFoundPath()
	}
	if k.Namespaced && info.namespace == "" && len(parts) > 1 {
		return notFoundPath() // a namespaced object needs its namespace in the path
	}
	info.kind, info.served = k, servedVersionOf(k, version)
	if len(parts) > 1 {
		info.name = parts[1]
	}
	if len(parts) > 2 {
		info.sub = parts[2]
	}
	info.verb = resourceVerb(r, info.name)
	return nil
}

// apiPath splits a path under /api/VERSION (the core group) or
// /apis/GROUP/VERSION into its group, its version and the rest, which
// names at least one segment; false for any other path. parseRequest
// resolves the rest to a kind the server serves, and RBAC reads one it
// does not serve by its shape (authz.go, shapeAttributes).
func apiPath(p string, buf *[8]string) (group, version string, rest []string, ok bool) {
	parts := pathSegments(p, buf)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		return "", parts[1], parts[2:], true
	case len(parts) >= 4 && parts[0] == "apis":
		return parts[1], parts[2], parts[3:], true
	}
	return "", "", nil, false
}

// resourceVerb is the verb of a request for a resource, by its method
// and the object it names (name "" for none): a GET of no object lists,
// or watches where the query asks to; a GET of one gets it; POST creates,
// PUT updates; any other method is its own name in lower case (patch,
// delete: a DELETE of no object deletes a collection, which RBAC names
// deletecollection: authz.go, resourceAttributes).
func resourceVerb(r *http.Request, name string) string {
	if r.Method == http.MethodGet && name == "" {
		if watchRequested(r) {
			return "watch"
		}
		return "list"
	}
	return methodVerb(r.Method)
}

// methodVerb is the verb of a request on one object by its HTTP method.
func methodVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	}
	return strings.ToLower(method)
}

// pathSegments is strings.Split(strings.Trim(p, "/"), "/") into buf's
// array while the segments fit (an API path has at most seven), so that
// splitting every request's path allocates nothing.
func pathSegments(p string, buf *[8]string) []string {
	p = strings.Trim(p, "/")
	parts := buf[:0]
	for {
		seg, rest, found := strings.Cut(p, "/")
		parts = append(parts, seg)
		if !found {
			return parts
		}
		p = rest
	}
}

// query is r.URL.Query() to read, nil (which reads as empty) when the
// request has no query: url.ParseQuery makes a map even for none, and
// most requests carry none.
func query(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	return r.URL.Query()
}

// queryGet is query(r).Get(key).
func queryGet(r *http.Request, key string) string {
	return query(r).Get(key)
}

// watchRequested reads the watch parameter as Kubernetes reads a query
// bool: anything but "", "0" and "false" in any case is true (the Python
// client sends watch=True).
func watchRequested(r *http.Request) bool {
	w := queryGet(r, "watch")
	return w != "" && w != "0" && !strings.EqualFold(w, "false")
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	ctx, w, body, ok := s.prepareRequest(w, r, info)
	if !ok {
		return
	}
	k := info.kind
	route := info.sub + " " + r.Method
	if info.name == "" {
		route = "collection " + r.Method
	}
	switch route {
	case "collection GET":
		s.serveList(ctx, w, r, info)
	case "collection POST":
		if k.Namespaced && info.namespace == "" {
			writeError(w, methodNotAllowed("create without a namespace in the path", k))
			return
		}
		obj, err := decodeObjectCtx(ctx, k, body, info.namespace, "")
		var raw []byte
		if err == nil {
			obj, raw, err = s.reg.CreateEncoded(ctx, k, obj)
		}
		respondEncoded(w, http.StatusCreated, obj, raw, err)
	case " GET", "status GET":
		out, err := s.negotiateOutput(r) // a Table for kubectl get (table.go)
		if err != nil {
			writeError(w, err)
			return
		}
		obj, err := s.reg.Get(ctx, k, info.namespace, info.name)
		if err == nil && out != nil {
			out.writeTable(w, k, []api.Object{obj}, obj.GetObjectMeta().ResourceVersion)
			return
		}
		respond(w, http.StatusOK, obj, err)
	case " PUT", "status PUT":
		if info.sub == "status" && !k.HasStatus {
			writeError(w, notFoundPath())
			return
		}
		obj, err := decodeObjectCtx(ctx, k, body, info.namespace, info.name)
		if err == nil && info.sub == "status" {
			obj, err = s.reg.UpdateStatus(ctx, k, obj)
		} else if err == nil {
			obj, err = s.reg.Update(ctx, k, obj)
		}
		respond(w, http.StatusOK, obj, err)
	case " PATCH", "status PATCH":
		if info.sub == "status" && !k.HasStatus {
			writeError(w, notFoundPath())
			return
		}
		if patch.ParseType(r.Header.Get("Content-Type")) == patch.ApplyPatch {
			s.serveApply(w, r.WithContext(ctx), info, body) // apply.go
			return
		}
		obj, err := s.patch(ctx, info, r.Header.Get("Content-Type"), body)
		respond(w, http.StatusOK, obj, err)
	case " DELETE":
		s.serveDelete(ctx, w, r, info, body)
	case "binding POST":
		s.serveBinding(w, r, info, body)
	case "eviction POST":
		s.serveEviction(w, r.WithContext(ctx), info, body) // eviction.go
	case "token POST":
		s.serveToken(w, r, info, body) // serviceaccount_token.go
	case "ephemeralcontainers GET", "ephemeralcontainers PUT", "ephemeralcontainers PATCH":
		s.serveEphemeralContainers(ctx, w, r, info, body) // ephemeral.go
	case "scale GET", "scale PUT", "scale PATCH":
		s.serveScale(w, r, info, body)
	case "trace GET", "trace POST":
		s.serveTrace(w, r, info, body)
	case "approval PUT":
		if k != csrKind {
			writeError(w, notFoundPath())
			return
		}
		s.serveApproval(ctx, w, info, body) // certificates.go
	case "finalize PUT":
		if k != namespaceKind {
			writeError(w, notFoundPath())
			return
		}
		obj, err := decodeObject(k, body, "", info.name)
		if err == nil {
			obj, err = s.reg.FinalizeNamespace(ctx, info.name, obj.(*api.Namespace).Spec.Finalizers)
		}
		respond(w, http.StatusOK, obj, err)
	default:
		if knownSub(k, info.sub) {
			writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
				fmt.Sprintf("method %s is not supported on %s", r.Method, info.resource())))
			return
		}
		writeError(w, notFoundPath())
	}
}

// prepareRequest reads what every request on a resource needs before its
// verb: the body (protobuf turned into JSON), a further served version's
// conversion to the stored one (its answers converted back by the
// returned writer) and warning, field validation, and managedFields
// tracking, with the admission warnings as Warning headers (warning.go).
// On false the error has been answered.
func (s *Server) prepareRequest(w http.ResponseWriter, r *http.Request, info *requestInfo) (context.Context, http.ResponseWriter, []byte, bool) {
	ctx := withWarnings(r.Context(), w) // admission warnings become Warning headers (warning.go)
	k := info.kind
	if k.Internal && r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(info.verb, k))
		return nil, nil, nil, false
	}
	var body []byte
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete {
		b, err := s.readBody(w, r)
		if err == nil && isProtobuf(r) {
			b, err = protobufToJSON(b) // protobuf.go: into the one JSON decoder
		}
		if err != nil {
			writeError(w, err)
			return nil, nil, nil, false
		}
		body = b
	}
	if info.served != nil { // a further served version (versions.go)
		addWarning(ctx, info.served.Warning)
		w = &versionWriter{ResponseWriter: w, kind: k, served: info.served}
		b, err := toStoredBody(info, r.Header.Get("Content-Type"), body)
		if err != nil {
			writeError(w, api.NewBadRequest(err.Error()))
			return nil, nil, nil, false
		}
		body = b
	}
	ctx, fvErr := withFieldValidation(ctx, r) // fieldvalidation.go
	if fvErr != nil {
		writeError(w, fvErr)
		return nil, nil, nil, false
	}
	ctx, err := trackingContext(ctx, r, info) // apply.go: managedFields
	if err != nil {
		writeError(w, err)
		return nil, nil, nil, false
	}
	return ctx, w, body, true
}

// serveList answers a list (a Table for kubectl get: table.go) or a watch.
func (s *Server) serveList(ctx context.Context, w http.ResponseWriter, r *http.Request, info *requestInfo) {
	opts, err := listOptions(r, info.verb == "watch")
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.negotiateOutput(r) // a Table for kubectl get (table.go)
	if err != nil {
		writeError(w, err)
		return
	}
	if info.verb == "watch" {
		s.serveWatch(w, r, info, opts, out)
		return
	}
	items, rv, err := s.reg.List(ctx, info.kind, info.namespace, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	if out != nil {
		out.writeTable(w, info.kind, items, rv)
		return
	}
	writeList(w, info.kind, items, rv)
}

// serveDelete deletes an object: 200 when it is gone, 202 while its
// deletion is pending (graceful, or finalizers).
func (s *Server) serveDelete(ctx context.Context, w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	opts, err := deleteOptions(r, body)
	if err == nil {
		ctx, err = dryRunOption(ctx, "DeleteOptions", opts.DryRun) // dryrun.go
	}
	if err != nil {
		writeError(w, err)
		return
	}
	obj, removed, err := s.reg.Delete(ctx, info.kind, info.namespace, info.name, opts)
	code := http.StatusOK
	if !removed {
		code = http.StatusAccepted // deletion pending: graceful or finalizers
	}
	respond(w, code, obj, err)
}

// knownSub reports whether sub is a subresource (or "" the object) of k.
func knownSub(k *api.Kind, sub string) bool {
	switch sub {
	case "":
		return true
	case "status":
		return k.HasStatus
	case "binding", "log", "exec", "attach", "portforward", "eviction", "ephemeralcontainers":
		return k == podKind
	case "trace":
		return traced(k)
	case "scale":
		return k.HasScale
	case "token":
		return k == serviceAccountKind
	case "finalize":
		return k == namespaceKind
	case "approval":
		return k == csrKind
	case "proxy":
		return k == nodeKind
	}
	return false
}

// serveWatch streams a watch; with out, each event's object is a Table
// of one row (table.go).
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, info *requestInfo, opts api.ListOptions, out *tableOutput) {
	timeout := s.cfg.MaxWatchTimeout
	if t := time.Duration(opts.TimeoutSeconds) * time.Second; t > 0 && t < timeout {
		timeout = t
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	stop := context.AfterFunc(s.watchCtx, cancel) // server shutdown ends the stream
	defer stop()

	ws, err := s.reg.startWatch(ctx, info.kind, info.namespace, opts)
	if err != nil && !streamedWatchError(err) {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(t api.WatchEventType, o any) error {
		if out != nil {
			var err error
			if o, err = out.watchObject(info.kind, t, o); err != nil {
				return err
			}
		}
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if err := enc.Encode(api.WatchEvent{Type: t, Object: b}); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err != nil {
		// Too old (410) or too new (504): one ERROR event with the Status;
		// the client lists again.
		var se *api.StatusError
		errors.As(err, &se)
		_ = send(api.Error, se.Status)
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	s.metrics.AddWatchers(info.kind.Resource, 1)
	defer s.metrics.AddWatchers(info.kind.Resource, -1)
	err = ws.run(ctx, func(t api.WatchEventType, o api.Object) error { return send(t, o) })
	if err != nil && ctx.Err() == nil {
		s.log.Debug("watch stream ended", "resource", info.kind.Resource, "err", err)
	}
}

func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	if info.kind != podKind {
		writeError(w, notFoundPath())
		return
	}
	var b api.Binding
	if err := strictUnmarshal(body, &b); err != nil {
		writeError(w, api.NewBadRequest("decode Binding: "+err.Error()))
		return
	}
	if b.Name == "" {
		b.Name = info.name
	}
	if b.Namespace == "" {
		b.Namespace = info.namespace
	}
	if b.Name != info.name || b.Namespace != info.namespace {
		writeError(w, api.NewBadRequest("the name and namespace of the Binding must match the pod on the URL"))
		return
	}
	if err := s.reg.Bind(r.Context(), &b); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Status{
		TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Success", Code: http.StatusCreated,
	})
}

func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	ctx := r.Context()
	k := info.kind
	switch r.Method {
	case http.MethodGet:
		sc, err := s.reg.GetScale(ctx, k, info.namespace, info.name)
		respond(w, http.StatusOK, sc, err)
	case http.MethodPut:
		var sc api.Scale
		if err := strictUnmarshal(body, &sc); err != nil {
			writeError(w, api.NewBadRequest("decode Scale: "+err.Error()))
			return
		}
		out, err := s.reg.UpdateScale(ctx, k, info.namespace, info.name, &sc)
		respond(w, http.StatusOK, out, err)
	case http.MethodPatch:
		out, err := s.patchScale(ctx, info, r.Header.Get("Content-Type"), body)
		respond(w, http.StatusOK, out, err)
	}
}

func (s *Server) serveTrace(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	if !traced(info.kind) {
		writeError(w, notFoundPath())
		return
	}
	if r.Method == http.MethodGet {
		t, err := s.reg.GetObjectTrace(r.Context(), info.kind, info.namespace, info.name)
		respond(w, http.StatusOK, t, err)
		return
	}
	// The body is a PodTrace ({"spans":[...]}) or a bare array of spans.
	var spans []api.TraceSpan
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		if err := strictUnmarshal(b, &spans); err != nil {
			writeError(w, api.NewBadRequest("decode trace spans: "+err.Error()))
			return
		}
	} else {
		var t api.PodTrace
		if err := strictUnmarshal(body, &t); err != nil {
			writeError(w, api.NewBadRequest("decode PodTrace: "+err.Error()))
			return
		}
		spans = t.Spans
	}
	t, err := s.reg.AddObjectTrace(r.Context(), info.kind, info.namespace, info.name, spans...)
	respond(w, http.StatusCreated, t, err)
}

// readBody reads at most Config.MaxRequestBytes, whatever the content type
// (an object, any of the three patches, DeleteOptions), as kube-apiserver's
// limitedReadBody; more is 413 and nothing else happens.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxRequestBytes
	tooLarge := func() error {
		return api.NewStatusError(http.StatusRequestEntityTooLarge, api.ReasonTooLarge,
			fmt.Sprintf("Request entity too large: limit is %d", limit)) // kube-apiserver's words
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	b, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge()
	}
	if err != nil {
		return nil, api.NewBadRequest("read request body: " + err.Error())
	}
	return b, nil
}

// presizeMax is the most readAll allocates for a body before it arrives.
const presizeMax = 64 << 10

// readAll is io.ReadAll into a buffer of the body's declared length (plus
// one byte, to meet the end without growing), where io.ReadAll starts at
// 512 bytes and doubles. It takes no more than presizeMax on a client's
// word: a body declared long and sent slowly (or never) must not hold
// memory it has not sent.
func readAll(body io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(body)
	}
	b := make([]byte, 0, min(length, presizeMax)+1)
	for {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than declared: grow as io.ReadAll does
		}
	}
}

// decodeObject decodes a request body of kind k strictly. apiVersion and
// kind, when given, must be k's; namespace and name, when given, must be the
// path's (which fill them when absent).
func decodeObject(k *api.Kind, body []byte, namespace, name string) (api.Object, error) {
	return decodeObjectCtx(context.Background(), k, body, namespace, name)
}

// decodeObjectCtx is decodeObject under the request's field validation
// (fieldvalidation.go): Warn and Ignore drop unknown fields, Warn says so.
func decodeObjectCtx(ctx context.Context, k *api.Kind, body []byte, namespace, name string) (api.Object, error) {
	obj, ok := api.DecodeClean(k, body) // nearly every request: nothing in it to report
	if !ok {
		var err error
		if obj, err = decodeChecked(ctx, k, body); err != nil {
			return nil, err
		}
	}
	m := obj.GetObjectMeta()
	if k.Namespaced {
		if m.Namespace == "" {
			m.Namespace = namespace
		} else if m.Namespace != namespace {
			return nil, api.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", m.Namespace, namespace))
		}
	}
	if name != "" {
		if m.Name == "" {
			m.Name = name
		} else if m.Name != name {
			return nil, api.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.Name, name))
		}
	}
	return obj, nil
}

// decodeChecked decodes a body that is not clean (api.DecodeClean) and
// says what is wrong with it in kube-apiserver's words.
func decodeChecked(ctx context.Context, k *api.Kind, body []byte) (api.Object, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, api.NewBadRequest("the request body is empty: send a " + k.Kind)
	}
	var tm api.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, api.NewBadRequest("the request body is not a JSON object: " + err.Error())
	}
	if tm.APIVersion != "" && tm.APIVersion != k.APIVersion() {
		return nil, api.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, k.APIVersion()))
	}
	if tm.Kind != "" && tm.Kind != k.Kind {
		return nil, api.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", tm.Kind, k.Kind))
	}
	fv := fieldValidationFrom(ctx)
	obj, dropped, err := api.DecodeJSONWith(k, body, fv.mode)
	warnDropped(ctx, fv, dropped)
	if err != nil {
		var se *api.StatusError
		if errors.As(err, &se) {
			return nil, se
		}
		bad := api.NewBadRequest(err.Error())
		var de *api.DecodeError
		if errors.As(err, &de) && fv.explicit {
			if msg, ok := strictDecodingMessage(k, de.Fields); ok {
				bad.Status.Message = msg // kube-apiserver's words for kubectl
			}
		}
		if errors.As(err, &de) && len(de.Fields) > 0 {
			bad.Status.Details = &api.StatusDetails{Kind: k.Resource, Group: k.Group}
			for _, fe := range de.Fields {
				bad.Status.Details.Causes = append(bad.Status.Details.Causes, api.StatusCause{Type: string(fe.Type), Message: fe.Error(), Field: fe.Field})
			}
		}
		return nil, bad
	}
	return obj, nil
}

// strictUnmarshal decodes a request body that is not an API object: unknown
// fields, keys given twice and data after the value are errors.
func strictUnmarshal(b []byte, v any) error {
	return api.UnmarshalStrict(b, v)
}

// listOptions reads a list or watch query. resourceVersionMatch,
// continue and sendInitialEvents are checked as Kubernetes checks them
// (resourceversion.go); skiff, like a server without the WatchList
// feature, refuses sendInitialEvents.
func listOptions(r *http.Request, watch bool) (api.ListOptions, error) {
	q := r.URL.Query()
	opts := api.ListOptions{
		LabelSelector:        q.Get("labelSelector"),
		FieldSelector:        q.Get("fieldSelector"),
		ResourceVersion:      q.Get("resourceVersion"),
		ResourceVersionMatch: q.Get("resourceVersionMatch"),
	}
	var sendInitialEvents *bool
	if v := q.Get("sendInitialEvents"); q.Has("sendInitialEvents") {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return opts, api.NewBadRequest(fmt.Sprintf("invalid sendInitialEvents %q", v))
		}
		sendInitialEvents = &b
	}
	if err := checkListOptions(opts, watch, q.Get("continue"), sendInitialEvents); err != nil {
		return opts, err
	}
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return opts, api.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
		opts.TimeoutSeconds = n
	}
	return opts, nil
}

// deleteOptions reads an optional DeleteOptions body; ?gracePeriodSeconds=
// and ?propagationPolicy= override it.
func deleteOptions(r *http.Request, body []byte) (api.DeleteOptions, error) {
	var opts api.DeleteOptions
	if len(bytes.TrimSpace(body)) > 0 {
		if err := strictUnmarshal(body, &opts); err != nil {
			return opts, api.NewBadRequest("decode DeleteOptions: " + err.Error())
		}
	}
	q := r.URL.Query()
	if g := q.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return opts, api.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", g))
		}
		opts.GracePeriodSeconds = &n
	}
	if p := q.Get("propagationPolicy"); p != "" {
		opts.PropagationPolicy = p
	}
	if err := api.CheckPropagationPolicy(opts.PropagationPolicy); err != nil {
		return opts, err
	}
	return opts, nil
}

// listJSON is a Kubernetes list: PodList, DeploymentList, ...
type listJSON struct {
	api.TypeMeta `json:",inline"`
	Metadata     api.ListMeta `json:"metadata"`
	Items        []api.Object `json:"items"`
}

func writeList(w http.ResponseWriter, k *api.Kind, items []api.Object, rv string) {
	if items == nil {
		items = []api.Object{}
	}
	writeJSON(w, http.StatusOK, listJSON{
		TypeMeta: api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind + "List"},
		Metadata: api.ListMeta{ResourceVersion: rv},
		Items:    items,
	})
}

// respond writes v with code, or err as a Status.
func respond(w http.ResponseWriter, code int, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, code, v)
}

// writeError is api.WriteStatus: err's Status, with a Retry-After header
// when the Status carries a retry hint (as kube-apiserver).
func writeError(w http.ResponseWriter, err error) { api.WriteStatus(w, err) }

// respondEncoded is respond for an object whose JSON the store handed
// back (Registry.CreateEncoded): those bytes are the body, as writeJSON
// would have encoded them; without them (nil), writeJSON encodes obj.
func respondEncoded(w http.ResponseWriter, code int, obj api.Object, raw []byte, err error) {
	if err != nil || raw == nil {
		respond(w, code, obj, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(raw)
	w.Write([]byte{'\n'}) // raw is shared: never appended to
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(api.NewInternal(err).Status)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// recorder remembers the status code for metrics and logs.
type recorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush of the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
