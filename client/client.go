package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	sjson "sigs.k8s.io/json"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/pki"
)

// Client speaks HTTP to a skiff API server. It is safe for concurrent use;
// it holds no per-request state.
//
// With several servers (Config.Servers, SetServers) it sends each request
// to the one that answered last and moves on to the next when a server
// cannot be reached (the connection is refused or cannot be made: the
// request was never sent, so even a create is safe to send again). Any
// answer, an error status included, is the answer: a server that answers
// is never skipped.
type Client struct {
	token     string
	userAgent string
	http      *http.Client
	// as and asGroups are the impersonation headers (Config.Impersonate).
	as       string
	asGroups []string

	mu    sync.Mutex
	bases []*url.URL // never empty
	cur   int        // index of the server that answered last
	warn  func(text string)
}

var _ Interface = (*Client)(nil)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// New returns a client for the server in cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	bases, err := parseServers(append([]string{cfg.Server}, cfg.Servers...))
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	tr, err := cfg.transport()
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	// No overall timeout: watches and logs stream for as long as their ctx lives.
	ua := cfg.UserAgent
	if ua == "" {
		ua = UserAgent("skiff")
	}
	return &Client{bases: bases, token: cfg.Token, userAgent: ua, http: &http.Client{Transport: tr}, as: cfg.Impersonate, asGroups: cfg.ImpersonateGroups}, nil
}

// parseServers parses API server URLs (a bare host:port means https),
// dropping repeats.
func parseServers(servers []string) ([]*url.URL, error) {
	var out []*url.URL
	seen := map[string]bool{}
	for _, s := range servers {
		u, err := parseServer(s)
		if err != nil {
			return nil, err
		}
		if !seen[u.String()] {
			seen[u.String()] = true
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no API server")
	}
	return out, nil
}

func parseServer(s string) (*url.URL, error) {
	server := strings.TrimSpace(s)
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server %q: no host", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// Server returns the base URL the client talks to now.
func (c *Client) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bases[c.cur].String()
}

// Servers returns every API server the client knows, the current one first.
func (c *Client) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.bases))
	for i := range c.bases {
		out = append(out, c.bases[(c.cur+i)%len(c.bases)].String())
	}
	return out
}

// SetServers replaces the API servers the client may use (an agent
// learns them from gossip). The current server stays current when it is
// still listed. An empty or invalid list changes nothing and is an error.
func (c *Client) SetServers(servers []string) error {
	bases, err := parseServers(servers)
	if err != nil {
		return fmt.Errorf("set servers: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.bases[c.cur].String()
	c.bases, c.cur = bases, 0
	for i, u := range bases {
		if u.String() == cur {
			c.cur = i
		}
	}
	return nil
}

// UnreachableError means no connection to the API server could be made.
type UnreachableError struct {
	Server string
	// Others are the other servers tried, also unreachable.
	Others []string
	Err    error
}

func (e *UnreachableError) Error() string {
	if len(e.Others) > 0 {
		return fmt.Sprintf("cannot reach any skiff API server (%s, %s): is `skiff server` running?", e.Server, strings.Join(e.Others, ", "))
	}
	return fmt.Sprintf("cannot reach the skiff API server at %s: is `skiff up` running?", e.Server)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// unreachable reports whether err means no connection was made: the
// request was not sent, and another server may take it. A server that is
// no API server (pki.ErrNotAPIServer, refused in the handshake) is one
// of those: it is skipped, as one that is down.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, pki.ErrNotAPIServer) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// PathFor builds the REST path of a kind, as Kubernetes:
//
//	/api/v1/namespaces/{ns}/pods/{name}/{sub}
//	/apis/apps/v1/namespaces/{ns}/deployments
//	/api/v1/nodes/{name}
//
// An empty ns for a namespaced kind addresses all namespaces (list, watch);
// an empty name addresses the collection; sub is a subresource (status,
// binding, scale, trace, log, exec, finalize) or "".
func PathFor(kind *api.Kind, ns, name, sub string) string {
	var b strings.Builder
	if kind.Group == "" {
		b.WriteString("/api/" + kind.Version)
	} else {
		b.WriteString("/apis/" + kind.Group + "/" + kind.Version)
	}
	if kind.Namespaced && ns != "" {
		b.WriteString("/namespaces/" + url.PathEscape(ns))
	}
	b.WriteString("/" + kind.Resource)
	if name != "" {
		b.WriteString("/" + url.PathEscape(name))
		if sub != "" {
			b.WriteString("/" + sub)
		}
	}
	return b.String()
}

// Do sends one raw request to path (which may carry a query) and returns the
// response when its status is 2xx; the caller closes its body. Any other
// status is read, closed and returned as *api.StatusError. For the CLI's
// verbs that are not objects (logs, exec, healthz). With several servers,
// an unreachable one passes the request to the next (see Client).
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	c.mu.Lock()
	bases, first := c.bases, c.cur
	c.mu.Unlock()
	var data []byte
	if body != nil && len(bases) > 1 {
		// Kept to send again to the next server.
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
		}
		data = b
	}
	var tried []string
	for i := range bases {
		idx := (first + i) % len(bases)
		base := bases[idx]
		if data != nil {
			body = bytes.NewReader(data)
		}
		resp, err := c.do(ctx, base, method, path, body)
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			if i > 0 {
				c.mu.Lock()
				if len(c.bases) == len(bases) && c.bases[idx] == base {
					c.cur = idx
				}
				c.mu.Unlock()
			}
			return resp, err
		}
		tried = append(tried, base.String())
		if i == len(bases)-1 {
			if len(tried) == 1 && !errors.Is(err, syscall.ECONNREFUSED) {
				return nil, err // one server: as before, only a refusal says "is it running?"
			}
			return nil, &UnreachableError{Server: tried[0], Others: tried[1:], Err: err}
		}
	}
	panic("unreachable") // bases is never empty
}

// do sends one request to one server.
func (c *Client) do(ctx context.Context, base *url.URL, method, path string, body io.Reader) (*http.Response, error) {
	u, err := url.Parse(base.String() + path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if m := FieldManager(ctx); m != "" && method != http.MethodGet && method != http.MethodDelete && !u.Query().Has("fieldManager") {
		q := u.Query()
		q.Set("fieldManager", m)
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.as != "" {
		req.Header.Set("Impersonate-User", c.as)
		for _, g := range c.asGroups {
			req.Header.Add("Impersonate-Group", g)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	c.warnings(resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// SetWarningHandler sets the function that gets the text of each Warning
// header of a response (code 299, as the API server sends them: Pod
// Security's "would violate PodSecurity ..."), as client-go's
// WarningHandler; kubectl and skiff's CLI print "Warning: TEXT" on stderr.
// nil, the default, ignores them. The handler may be called from several
// goroutines at once.
func (c *Client) SetWarningHandler(h func(text string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warn = h
}

// warnings passes the Warning headers of a response to the handler.
func (c *Client) warnings(h http.Header) {
	vals := h.Values("Warning")
	if len(vals) == 0 {
		return
	}
	c.mu.Lock()
	handle := c.warn
	c.mu.Unlock()
	if handle == nil {
		return
	}
	ws, _ := utilnet.ParseWarningHeaders(vals) // the ones that parse, as client-go
	for _, w := range ws {
		if w.Code == 299 && w.Text != "" {
			handle(w.Text)
		}
	}
}

// Stream GETs path and returns the body to read until EOF (logs -f);
// cancel ctx or Close to stop.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// decodeError turns a non-2xx response into *api.StatusError. A body that is
// not a Status (a proxy's HTML, a plain-text panic) becomes the message of
// a Status carrying the HTTP code.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var st api.Status
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" && (st.Message != "" || st.Reason != "") {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		if st.Reason == "" {
			st.Reason = reasonForCode(resp.StatusCode)
		}
		return &api.StatusError{Status: st}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return api.NewStatusError(resp.StatusCode, reasonForCode(resp.StatusCode),
		fmt.Sprintf("the server responded with %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), msg))
}

// reasonForCode maps an HTTP code to a Status reason, as client-go does for
// responses without a Status body.
func reasonForCode(code int) api.StatusReason {
	switch code {
	case http.StatusNotFound:
		return api.ReasonNotFound
	case http.StatusConflict:
		return api.ReasonConflict
	case http.StatusGone:
		return api.ReasonGone
	case http.StatusBadRequest:
		return api.ReasonBadRequest
	case http.StatusUnauthorized:
		return api.ReasonUnauthorized
	case http.StatusForbidden:
		return api.ReasonForbidden
	case http.StatusRequestEntityTooLarge:
		return api.ReasonTooLarge
	case http.StatusMethodNotAllowed:
		return api.ReasonMethodNotAllowd
	case http.StatusUnprocessableEntity:
		return api.ReasonInvalid
	case http.StatusServiceUnavailable:
		return api.ReasonServiceUnavail
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return api.ReasonTimeout
	default:
		return api.ReasonInternal
	}
}

// call sends in (JSON, when not nil) and decodes the response into out
// (when not nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	resp, err := c.Do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// callObject is call for requests that answer with one object of kind.
func (c *Client) callObject(ctx context.Context, kind *api.Kind, method, path string, in any) (api.Object, error) {
	var raw json.RawMessage
	if err := c.call(ctx, method, path, nil, in, &raw); err != nil {
		return nil, err
	}
	return decodeObject(kind, raw)
}

// decodeObject decodes an object the API server answered. The server
// validated it when it was written, so this is client-go's lenient decode
// (case-sensitive, unknown fields ignored: a newer server's additions must
// not fail a read), not api.DecodeJSON's strict one for what users write,
// whose unknown-field walk was most of a large list's time
// (docs/performance.md, kubectl get). An answer in another version than
// the one asked for goes through api's conversion.
func decodeObject(kind *api.Kind, raw []byte) (api.Object, error) {
	obj := kind.New()
	if err := sjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		return nil, &api.DecodeError{Index: -1, Kind: kind.Kind, Err: err}
	}
	if tm := obj.GetTypeMeta(); (tm.APIVersion != "" && tm.APIVersion != kind.APIVersion()) || (tm.Kind != "" && tm.Kind != kind.Kind) {
		o, _, err := api.DecodeJSONWith(kind, raw, api.FieldValidationIgnore)
		if err != nil {
			return nil, err
		}
		obj = o
	}
	// Lists and some responses omit apiVersion/kind per item.
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Kind}
	return obj, nil
}

// namespaceOf is the namespace an object is written to: its own, "default"
// when a namespaced object has none, "" for cluster-scoped kinds.
func namespaceOf(kind *api.Kind, obj api.Object) string {
	if !kind.Namespaced {
		return ""
	}
	if ns := obj.GetObjectMeta().Namespace; ns != "" {
		return ns
	}
	return "default"
}

// withTypeMeta returns obj with apiVersion/kind filled in when empty,
// copying rather than modifying the caller's object.
func withTypeMeta(kind *api.Kind, obj api.Object) api.Object {
	tm := obj.GetTypeMeta()
	if tm.Kind == kind.Kind && tm.APIVersion == kind.APIVersion() {
		return obj
	}
	cp := api.Clone(obj)
	*cp.GetTypeMeta() = api.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Kind}
	return cp
}

// Create implements Interface.
func (c *Client) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	kind, err := api.KindOf(obj)
	if err != nil {
		return nil, err
	}
	return c.callObject(ctx, kind, http.MethodPost, PathFor(kind, namespaceOf(kind, obj), "", ""), withTypeMeta(kind, obj))
}

// Update implements Interface.
func (c *Client) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	return c.put(ctx, obj, "")
}

// UpdateStatus implements Interface.
func (c *Client) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	return c.put(ctx, obj, "status")
}

func (c *Client) put(ctx context.Context, obj api.Object, sub string) (api.Object, error) {
	kind, err := api.KindOf(obj)
	if err != nil {
		return nil, err
	}
	name := obj.GetObjectMeta().Name
	if name == "" {
		return nil, api.NewBadRequest(fmt.Sprintf("update %s: metadata.name is required", kind.Resource))
	}
	return c.callObject(ctx, kind, http.MethodPut, PathFor(kind, namespaceOf(kind, obj), name, sub), withTypeMeta(kind, obj))
}

// Delete implements Interface.
func (c *Client) Delete(ctx context.Context, kind *api.Kind, namespace, name string, opts api.DeleteOptions) error {
	if name == "" {
		return api.NewBadRequest(fmt.Sprintf("delete %s: name is required", kind.Resource))
	}
	opts.TypeMeta = api.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}
	return c.call(ctx, http.MethodDelete, PathFor(kind, namespace, name, ""), nil, opts, nil)
}

// Get implements Interface.
func (c *Client) Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	if name == "" {
		return nil, api.NewBadRequest(fmt.Sprintf("get %s: name is required", kind.Resource))
	}
	return c.callObject(ctx, kind, http.MethodGet, PathFor(kind, namespace, name, ""), nil)
}

// listBody is the wire form of a list: {"metadata":{...},"items":[...]}.
type listBody struct {
	Metadata api.ListMeta      `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

func listQuery(opts api.ListOptions) url.Values {
	q := url.Values{}
	if opts.LabelSelector != "" {
		q.Set("labelSelector", opts.LabelSelector)
	}
	if opts.FieldSelector != "" {
		q.Set("fieldSelector", opts.FieldSelector)
	}
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	if opts.ResourceVersionMatch != "" {
		q.Set("resourceVersionMatch", opts.ResourceVersionMatch)
	}
	if opts.TimeoutSeconds > 0 {
		q.Set("timeoutSeconds", strconv.FormatInt(opts.TimeoutSeconds, 10))
	}
	return q
}

// List implements Interface.
func (c *Client) List(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	var lb listBody
	if err := c.call(ctx, http.MethodGet, PathFor(kind, namespace, "", ""), listQuery(opts), nil, &lb); err != nil {
		return nil, "", err
	}
	out := make([]api.Object, 0, len(lb.Items))
	for i, raw := range lb.Items {
		obj, err := decodeObject(kind, raw)
		if err != nil {
			return nil, "", fmt.Errorf("list %s: item %d: %w", kind.Resource, i, err)
		}
		out = append(out, obj)
	}
	return out, lb.Metadata.ResourceVersion, nil
}

// Watch implements Interface. The stream is newline-delimited JSON
// api.WatchEvent values; each object is decoded as kind.
func (c *Client) Watch(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) (Watcher, error) {
	q := listQuery(opts)
	q.Set("watch", "1")
	wctx, cancel := context.WithCancel(ctx)
	resp, err := c.Do(wctx, http.MethodGet, PathFor(kind, namespace, "", "")+"?"+q.Encode(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	w := newStreamWatcher(wctx, cancel, kind, resp.Body)
	go w.run()
	return w, nil
}

// Bind implements Interface: POST pods/NAME/binding.
func (c *Client) Bind(ctx context.Context, b *api.Binding) error {
	pods := podKind()
	body := *b
	body.TypeMeta = api.TypeMeta{APIVersion: "v1", Kind: "Binding"}
	ns := b.Namespace
	if ns == "" {
		ns = "default"
	}
	return c.call(ctx, http.MethodPost, PathFor(pods, ns, b.Name, "binding"), nil, &body, nil)
}

// Evict asks the API server to evict a pod (POST pods/NAME/eviction,
// policy/v1), as kubectl drain does: the pod's delete, unless its
// PodDisruptionBudget refuses (429 TooManyRequests: try again later).
func (c *Client) Evict(ctx context.Context, namespace, name string, opts api.DeleteOptions) error {
	body := api.Eviction{TypeMeta: api.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: namespace}, DeleteOptions: &opts}
	return c.call(ctx, http.MethodPost, PathFor(podKind(), namespace, name, "eviction"), nil, &body, nil)
}

// GetScale implements Interface.
func (c *Client) GetScale(ctx context.Context, kind *api.Kind, namespace, name string) (*api.Scale, error) {
	var s api.Scale
	if err := c.call(ctx, http.MethodGet, PathFor(kind, namespace, name, "scale"), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UpdateScale implements Interface.
func (c *Client) UpdateScale(ctx context.Context, kind *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error) {
	body := *s
	body.TypeMeta = api.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"}
	var out api.Scale
	if err := c.call(ctx, http.MethodPut, PathFor(kind, namespace, name, "scale"), nil, &body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AddTrace implements Interface: POST pods/NAME/trace with a JSON array of spans.
func (c *Client) AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error {
	if len(spans) == 0 {
		return nil
	}
	return c.call(ctx, http.MethodPost, PathFor(podKind(), namespace, pod, "trace"), nil, spans, nil)
}

// GetTrace implements Interface.
func (c *Client) GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error) {
	var t api.PodTrace
	if err := c.call(ctx, http.MethodGet, PathFor(podKind(), namespace, pod, "trace"), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// AddObjectTrace implements ObjectTracer: POST RESOURCE/NAME/trace.
func (c *Client) AddObjectTrace(ctx context.Context, k *api.Kind, namespace, name string, spans ...api.TraceSpan) error {
	if len(spans) == 0 {
		return nil
	}
	return c.call(ctx, http.MethodPost, PathFor(k, namespace, name, "trace"), nil, spans, nil)
}

// GetObjectTrace implements ObjectTracer.
func (c *Client) GetObjectTrace(ctx context.Context, k *api.Kind, namespace, name string) (*api.PodTrace, error) {
	var t api.PodTrace
	if err := c.call(ctx, http.MethodGet, PathFor(k, namespace, name, "trace"), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func podKind() *api.Kind { return api.MustKindOf(&api.Pod{}) }

// streamWatcher decodes a watch response body into Events.
type streamWatcher struct {
	ctx    context.Context
	cancel context.CancelFunc
	kind   *api.Kind
	body   io.ReadCloser
	ch     chan Event
	done   chan struct{}

	mu      sync.Mutex
	err     error
	stopped bool
}

func newStreamWatcher(ctx context.Context, cancel context.CancelFunc, kind *api.Kind, body io.ReadCloser) *streamWatcher {
	return &streamWatcher{ctx: ctx, cancel: cancel, kind: kind, body: body, ch: make(chan Event), done: make(chan struct{})}
}

func (w *streamWatcher) Events() <-chan Event { return w.ch }

// Stop cancels the request and waits for the decoding goroutine to close Events.
func (w *streamWatcher) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	<-w.done
}

func (w *streamWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *streamWatcher) run() {
	defer close(w.done)
	defer close(w.ch)
	defer w.cancel()
	defer w.body.Close()
	dec := json.NewDecoder(w.body)
	for {
		var we api.WatchEvent
		if err := dec.Decode(&we); err != nil {
			if err != io.EOF {
				w.fail(fmt.Errorf("watch %s: %w", w.kind.Resource, err))
			}
			return
		}
		ev, err := decodeWatchEvent(w.kind, we)
		if err != nil {
			w.fail(err)
			return
		}
		select {
		case w.ch <- ev:
		case <-w.ctx.Done():
			return
		}
	}
}

// fail records err unless the watch was stopped or its ctx ended, in which
// case the read error is only the consequence of that.
func (w *streamWatcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.ctx.Err() != nil {
		return
	}
	w.err = err
}

// decodeWatchEvent decodes one event of the stream. An ERROR event becomes
// the returned error (its Status, e.g. 410 Gone).
func decodeWatchEvent(kind *api.Kind, we api.WatchEvent) (Event, error) {
	switch we.Type {
	case api.Added, api.Modified, api.Deleted, api.Bookmark:
	case api.Error:
		var st api.Status
		if err := json.Unmarshal(we.Object, &st); err != nil {
			return Event{}, fmt.Errorf("watch %s: decode error event: %w", kind.Resource, err)
		}
		if st.Reason == "" && st.Code != 0 {
			st.Reason = reasonForCode(int(st.Code))
		}
		return Event{}, &api.StatusError{Status: st}
	default:
		return Event{}, fmt.Errorf("watch %s: unknown event type %q", kind.Resource, we.Type)
	}
	obj, err := decodeObject(kind, we.Object)
	if err != nil {
		return Event{}, fmt.Errorf("watch %s: %s event: %w", kind.Resource, we.Type, err)
	}
	return Event{Type: we.Type, Object: obj}, nil
}
