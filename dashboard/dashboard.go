package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/pki"
)

// Paths.
const (
	// Prefix starts every dashboard path; the API server hands these to
	// the dashboard before its own authentication (the cookie is the
	// dashboard's credential).
	Prefix = apiserver.DashboardPrefix
	// LoginPath exchanges a one-time code for a session cookie.
	LoginPath = Prefix + "login"
	// LoginCodePath is where `skiff dashboard` asks for a code (POST, a
	// LoginCodeRequest): a skiff-only path the API server serves after
	// authentication and authorization; the session reads as the user
	// who asked.
	LoginCodePath = apiserver.DashboardLoginCodePrefix + "login-codes"
	// CookieName is the session cookie.
	CookieName = "skiff-dashboard"
)

// LoginCodeRequest asks for a login code that lands on View. A field it
// does not have, or a view that is none of these, is refused (400).
type LoginCodeRequest struct {
	// View: "" (the cluster view), "chain/NS/NAME", "sequence/NODE",
	// "hpa/NS/NAME" or "loops".
	View string `json:"view,omitempty"`
}

// LoginCodeResponse is the answer: URL (a path with the code, to put
// after the API server's address) and when the code expires.
type LoginCodeResponse struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

//go:embed assets
var assets embed.FS

// NodeProxy reaches a node's agent (the API server's nodes/NAME/proxy,
// apiserver.Proxy.ServeNode).
type NodeProxy interface {
	ServeNode(w http.ResponseWriter, r *http.Request, name, path string)
}

// Config of a Dashboard.
type Config struct {
	// Client reads the cluster on the session user's behalf (the API
	// server's Local). Required.
	Client client.Interface
	// Sessions, or a new set.
	Sessions *Sessions
	// Reconciles: the controllers' reconcile lines; nil shows none.
	Reconciles *Reconciles
	// NodeProxy for the sequence view; nil answers it 503.
	NodeProxy NodeProxy
	// Log, or discard.
	Log *slog.Logger
	// Heartbeat: a comment on the event stream this often, so proxies
	// and the browser keep it open (15 s).
	Heartbeat time.Duration
}

// Dashboard serves Prefix and LoginCodePath.
type Dashboard struct {
	cfg    Config
	static http.Handler
}

// New returns the dashboard.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Client == nil {
		return nil, errors.New("dashboard: no client")
	}
	if cfg.Sessions == nil {
		cfg.Sessions = NewSessions()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("dashboard assets: %w", err)
	}
	return &Dashboard{cfg: cfg, static: http.StripPrefix(Prefix, http.FileServerFS(sub))}, nil
}

// Sessions returns the dashboard's sessions.
func (d *Dashboard) Sessions() *Sessions { return d.cfg.Sessions }

// ServeHTTP serves LoginCodePath (the caller authenticated the request:
// apiserver.UserFrom) and everything under Prefix (authenticated here by
// the session cookie).
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	switch {
	case r.URL.Path == LoginCodePath:
		d.serveLoginCode(w, r)
		return
	case r.URL.Path == LoginPath:
		d.serveLogin(w, r)
		return
	case !strings.HasPrefix(r.URL.Path, Prefix):
		api.WriteStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "the server could not find the requested resource"))
		return
	}
	u, ok := d.sessionUser(r)
	if !ok {
		unauthorized(w)
		return
	}
	ctx := apiserver.WithUser(r.Context(), u)
	r = r.WithContext(ctx)
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	switch {
	case rest == "" && r.Method == http.MethodGet:
		d.serveAsset(w, r, "index.html")
	case strings.HasPrefix(rest, "static/") && r.Method == http.MethodGet:
		d.static.ServeHTTP(w, r)
	case rest == "api/whoami":
		writeJSON(w, map[string]any{"user": u.Name, "groups": u.Groups})
	case rest == "api/logout" && r.Method == http.MethodPost:
		if c, err := r.Cookie(CookieName); err == nil {
			d.cfg.Sessions.End(c.Value)
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		w.WriteHeader(http.StatusNoContent)
	case rest == "api/watch":
		d.serveWatch(w, r)
	case strings.HasPrefix(rest, "api/chain/"):
		d.serveChain(w, r, strings.TrimPrefix(rest, "api/chain/"))
	case strings.HasPrefix(rest, "api/hpa/") && r.Method == http.MethodGet:
		d.serveHPA(w, r, strings.TrimPrefix(rest, "api/hpa/"))
	case strings.HasPrefix(rest, "api/devices/"):
		d.serveDevices(w, r, strings.TrimPrefix(rest, "api/devices/"))
	default:
		api.WriteStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "the server could not find the requested resource"))
	}
}

// secureHeaders: the page may load only what the server serves (a
// Content-Security-Policy of 'self'), never be framed, never be cached.
func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func (d *Dashboard) sessionUser(r *http.Request) (apiserver.User, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return apiserver.User{}, false
	}
	return d.cfg.Sessions.User(c.Value)
}

func unauthorized(w http.ResponseWriter) {
	api.WriteStatus(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized,
		"Unauthorized: no dashboard session (run `skiff dashboard` for a login URL)"))
}

// viewPattern is what a login may land on.
var viewPattern = regexp.MustCompile(`^(|cluster|loops|hpa|(chain|hpa)/[a-z0-9.-]+/[a-z0-9.-]+|sequence/[a-z0-9.-]+)$`)

func (d *Dashboard) serveLoginCode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteStatus(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd, "the server does not allow this method on the requested resource"))
		return
	}
	u, ok := apiserver.UserFrom(r.Context())
	if !ok {
		unauthorized(w)
		return
	}
	// Any authenticated user gets a code for themselves: a session reads
	// through the API server's Local as that user, authorized as every
	// request of theirs is (a student sees what their credential may read).
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err != nil {
		api.WriteStatus(w, api.NewBadRequest(fmt.Sprintf("read dashboard login request: %v", err)))
		return
	}
	var req LoginCodeRequest
	if err := api.UnmarshalStrict(body, &req); err != nil {
		api.WriteStatus(w, api.NewBadRequest(fmt.Sprintf("decode dashboard login request: %v", err)))
		return
	}
	if !viewPattern.MatchString(req.View) {
		api.WriteStatus(w, api.NewBadRequest(fmt.Sprintf("view %q: want chain/NAMESPACE/POD, sequence/NODE, hpa/NAMESPACE/NAME, loops or cluster", req.View)))
		return
	}
	code, exp, err := d.cfg.Sessions.NewCode(u, req.View)
	if err != nil {
		api.WriteStatus(w, api.NewStatusError(http.StatusTooManyRequests, api.ReasonTooManyRequests, err.Error()))
		return
	}
	d.cfg.Log.Info("dashboard login code issued", "user", u.Name, "view", req.View, "expires", exp)
	writeJSON(w, LoginCodeResponse{URL: LoginPath + "?code=" + url.QueryEscape(code), Expires: exp})
}

// serveLogin exchanges ?code= for a session cookie and redirects to the
// view without the code. A bad, used or expired code is 401.
func (d *Dashboard) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		api.WriteStatus(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd, "the server does not allow this method on the requested resource"))
		return
	}
	id, view, exp, ok, err := d.cfg.Sessions.Exchange(r.URL.Query().Get("code"))
	if err != nil {
		api.WriteStatus(w, api.NewStatusError(http.StatusTooManyRequests, api.ReasonTooManyRequests, err.Error()))
		return
	}
	if !ok {
		api.WriteStatus(w, api.NewStatusError(http.StatusUnauthorized, api.ReasonUnauthorized,
			"Unauthorized: this login URL was already used or has expired (run `skiff dashboard` for a new one)"))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: Prefix, Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	target := Prefix
	if view != "" {
		target += "#/" + view
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func (d *Dashboard) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		api.WriteStatus(w, api.NewInternal(err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// Chain is what the chain view draws: the pod, its trace, its events.
type Chain struct {
	Pod    *api.Pod      `json:"pod"`
	Trace  *api.PodTrace `json:"trace"`
	Events []api.Object  `json:"events"`
}

// GetChain reads a pod's chain through c.
func GetChain(ctx context.Context, c client.Interface, namespace, name string) (*Chain, error) {
	obj, err := c.Get(ctx, podKind(), namespace, name)
	if err != nil {
		return nil, err
	}
	tr, err := c.GetTrace(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("trace of pod %s/%s: %w", namespace, name, err)
	}
	pod := obj.(*api.Pod)
	evs, _, err := c.List(ctx, api.KindForResource("", "v1", "events"), namespace, api.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + name + ",involvedObject.uid=" + pod.UID,
	})
	if err != nil {
		evs = nil // events are a help, not the view
	}
	if evs == nil {
		evs = []api.Object{}
	}
	return &Chain{Pod: pod, Trace: tr, Events: evs}, nil
}

func (d *Dashboard) serveChain(w http.ResponseWriter, r *http.Request, rest string) {
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		api.WriteStatus(w, api.NewBadRequest("want /dashboard/api/chain/NAMESPACE/POD"))
		return
	}
	ch, err := GetChain(r.Context(), d.cfg.Client, ns, name)
	if err != nil {
		api.WriteStatus(w, err)
		return
	}
	writeJSON(w, ch)
}

// AgentDeviceCallsPath is the agent's call log (agent.DeviceCallsPath).
const AgentDeviceCallsPath = "/devices/calls"

func (d *Dashboard) serveDevices(w http.ResponseWriter, r *http.Request, node string) {
	if node == "" || strings.Contains(node, "/") {
		api.WriteStatus(w, api.NewBadRequest("want /dashboard/api/devices/NODE"))
		return
	}
	if can, ok := d.cfg.Client.(interface {
		Can(ctx context.Context, verb, group, resource, sub, namespace, name string) (bool, error)
	}); ok {
		// The agent's call log is the node's: as `kubectl get --raw
		// /api/v1/nodes/NODE/proxy/...` it needs nodes/proxy.
		allowed, err := can.Can(r.Context(), "get", "", "nodes", "proxy", "", node)
		if err != nil || !allowed {
			u, _ := apiserver.UserFrom(r.Context())
			api.WriteStatus(w, api.NewStatusError(http.StatusForbidden, api.ReasonForbidden,
				fmt.Sprintf("nodes %q is forbidden: User %q cannot get resource \"nodes/proxy\" in API group \"\" at the cluster scope", node, u.Name)))
			return
		}
	}
	if d.cfg.NodeProxy == nil {
		api.WriteStatus(w, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail, "this dashboard cannot reach the agents"))
		return
	}
	out := r.Clone(r.Context())
	out.URL = &url.URL{Path: AgentDeviceCallsPath}
	out.Header = http.Header{"Accept": {"application/json"}}
	d.cfg.NodeProxy.ServeNode(w, out, node, AgentDeviceCallsPath)
}

// reconcileFilter says which reconcile lines ctx's user sees: all for the
// cluster's admins (system:masters); for anyone else, those about an
// object of a namespace where they may list pods (the loops' keys name
// other users' objects otherwise).
func (d *Dashboard) reconcileFilter(ctx context.Context) func(Reconcile) bool {
	u, ok := apiserver.UserFrom(ctx)
	can, canOK := d.cfg.Client.(interface {
		Can(ctx context.Context, verb, group, resource, sub, namespace, name string) (bool, error)
	})
	if !ok || u.InGroup(pki.MastersGroup) || !canOK {
		return func(Reconcile) bool { return true }
	}
	seen := map[string]bool{}
	return func(r Reconcile) bool {
		ns, _, namespaced := strings.Cut(r.Key, "/")
		if !namespaced || ns == "" {
			return false
		}
		if v, ok := seen[ns]; ok {
			return v
		}
		v, err := can.Can(ctx, "list", "", "pods", "", ns, "")
		seen[ns] = err == nil && v
		return seen[ns]
	}
}

// watched are the kinds the live view shows, those of them the API
// serves (queues and claims once those features exist).
var watched = []struct{ group, resource string }{
	{"", "nodes"}, {"", "pods"}, {"apps", "deployments"}, {"apps", "replicasets"},
	{"batch", "jobs"}, {"kueue.x-k8s.io", "clusterqueues"}, {"kueue.x-k8s.io", "localqueues"},
	{"kueue.x-k8s.io", "workloads"}, {"resource.k8s.io", "resourceclaims"},
	{"autoscaling", "horizontalpodautoscalers"},
}

func podKind() *api.Kind { return api.KindForResource("", "v1", "pods") }

// event is one message of the stream.
type event struct {
	name string // SSE event name: reset, ADDED, MODIFIED, DELETED, reconcile, kinds
	data []byte
}

// serveWatch is the live stream (Server-Sent Events): for each watched
// kind a "reset" then its objects as ADDED (the watch's initial state)
// and every change after; the reconcile lines as "reconcile". A watch
// that ends (the server's watch timeout, a compaction) starts again with
// a reset.
func (d *Dashboard) serveWatch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	ch := make(chan event, 256)
	var wg sync.WaitGroup
	var kinds []string
	for _, wk := range watched {
		k := api.KindForResource(wk.group, "", wk.resource)
		if k == nil {
			continue
		}
		kinds = append(kinds, k.Resource)
		wg.Go(func() { d.watchKind(ctx, k, ch) })
	}
	if d.cfg.Reconciles != nil {
		wg.Go(func() { d.watchReconciles(ctx, ch) })
	}
	defer wg.Wait()
	defer cancel()
	kb, _ := json.Marshal(kinds)
	if !writeEvent(w, rc, event{"kinds", kb}) {
		return
	}
	tick := time.NewTicker(d.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ch:
			if !writeEvent(w, rc, e) {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

func writeEvent(w http.ResponseWriter, rc *http.ResponseController, e event) bool {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data); err != nil {
		return false
	}
	return rc.Flush() == nil
}

func send(ctx context.Context, ch chan<- event, e event) bool {
	select {
	case ch <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// watchKind forwards one kind's watch until ctx ends, watching again
// (after a reset) when a stream ends. A user who may not watch the kind
// cluster-wide gets the namespaces where they may (authorized as them):
// nothing else reaches their page.
func (d *Dashboard) watchKind(ctx context.Context, k *api.Kind, ch chan<- event) {
	reset, _ := json.Marshal(map[string]string{"kind": k.Resource})
	for ctx.Err() == nil {
		namespaces, err := d.watchable(ctx, k)
		var watchers []client.Watcher
		for _, ns := range namespaces {
			wt, werr := d.cfg.Client.Watch(ctx, k, ns, api.ListOptions{})
			if werr != nil {
				err = werr
				break
			}
			watchers = append(watchers, wt)
		}
		if err != nil {
			for _, wt := range watchers {
				wt.Stop()
			}
			d.cfg.Log.Debug("dashboard watch", "resource", k.Resource, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second): // the API server restarting: try again
			}
			continue
		}
		if !send(ctx, ch, event{"reset", reset}) || !d.forward(ctx, k, watchers, ch) {
			return
		}
	}
}

// watchable are the namespaces ctx's user may watch k in: [""] (all) when
// cluster-wide, else those of the existing namespaces they may.
func (d *Dashboard) watchable(ctx context.Context, k *api.Kind) ([]string, error) {
	can, ok := d.cfg.Client.(interface {
		Can(ctx context.Context, verb, group, resource, sub, namespace, name string) (bool, error)
	})
	if !ok {
		return []string{""}, nil
	}
	all, err := can.Can(ctx, "watch", k.Group, k.Resource, "", "", "")
	if err != nil || all {
		return []string{""}, err
	}
	if !k.Namespaced {
		return nil, nil
	}
	nss, _, err := d.cfg.Client.List(apiserver.WithoutUser(ctx), api.MustKindOf(&api.Namespace{}), "", api.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range nss {
		name := o.GetObjectMeta().Name
		if ok, err := can.Can(ctx, "watch", k.Group, k.Resource, "", name, ""); err != nil {
			return nil, err
		} else if ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// forward sends the events of watchers until one of them ends (it returns
// true: watch again) or ctx does (false).
func (d *Dashboard) forward(ctx context.Context, k *api.Kind, watchers []client.Watcher, ch chan<- event) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		for _, wt := range watchers {
			wt.Stop()
		}
	}()
	if len(watchers) == 0 {
		<-ctx.Done()
		return false
	}
	var wg sync.WaitGroup
	for _, wt := range watchers {
		wg.Go(func() {
			defer cancel() // one ended: all start again
			for ev := range wt.Events() {
				if ev.Type == api.Error || ev.Object == nil {
					return // a Gone or a failed stream: watch again
				}
				if ev.Type == api.Bookmark {
					continue
				}
				b, err := json.Marshal(map[string]any{"kind": k.Resource, "object": ev.Object})
				if err != nil {
					continue
				}
				if !send(ctx, ch, event{string(ev.Type), b}) {
					return
				}
			}
		})
	}
	<-ctx.Done()
	for _, wt := range watchers {
		wt.Stop()
	}
	wg.Wait()
	return true
}

func (d *Dashboard) watchReconciles(ctx context.Context, ch chan<- event) {
	var seq int64
	visible := d.reconcileFilter(ctx)
	for {
		recs, changed := d.cfg.Reconciles.Since(seq)
		for _, rec := range recs {
			seq = rec.Seq
			if !visible(rec) {
				continue
			}
			b, _ := json.Marshal(rec)
			if !send(ctx, ch, event{"reconcile", b}) {
				return
			}
			seq = rec.Seq
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Attach has the control plane configured by cfg serve the dashboard under
// Prefix: its handler, and a tee of the controllers' log into the
// control-loop view. The assembling code (`skiff up`, `skiff server`,
// tests) calls it; the control plane itself does not import the dashboard.
func Attach(cfg *controlplane.Config) {
	rec := NewReconciles(0)
	cfg.ControllerLog = func(h slog.Handler) slog.Handler { return TeeReconciles(h, rec) }
	cfg.Dashboard = func(d controlplane.DashboardDeps) (http.Handler, error) {
		return New(Config{Client: d.Client, Reconciles: rec, NodeProxy: d.NodeProxy, Log: d.Log})
	}
}
