package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/metrics"
)

// Limits under load: what one client can hold of the server.
//
//   - Connections: http.Server's ReadHeaderTimeout and IdleTimeout
//     (server.go) close a connection that dribbles its headers (slow
//     loris) or sits idle.
//   - Concurrency: at most Config.MaxReadOnlyInflight reads and
//     Config.MaxMutatingInflight writes are served at once, as
//     kube-apiserver's max-in-flight filter (WithMaxInFlightLimit). One
//     more is not queued: it gets 429 "Too many requests, please try again
//     later." with "Retry-After: 1" at once, so a flood costs the server
//     almost nothing and the flooder backs off.
//   - Time: a request that is not long-running is answered 504 after
//     Config.RequestTimeout (WithTimeoutForNonLongRunningRequests).
//   - Bodies: Config.MaxRequestBytes (readBody in handlers.go).
//
// Long-running requests (watches, logs, exec, attach, port-forward, node
// proxy, snapshots) are exempt from the last two: they live as long as
// their stream, and their own bounds are MaxWatchTimeout and shutdown.

// The request_kind labels, kube-apiserver's.
const (
	readOnlyKind = "readOnly"
	mutatingKind = "mutating"
)

// retryAfterSeconds is what a 429 asks the client to wait: kube-apiserver's
// constant 1.
const retryAfterSeconds = 1

// timeoutWriteGrace is how long past its deadline a short request's
// connection may still be read and written: the 504 goes out first.
const timeoutWriteGrace = 5 * time.Second

// inflight is the max-in-flight filter: one semaphore per request kind
// (nil: no limit). Safe for concurrent use.
type inflight struct {
	readOnly, mutating chan struct{}
	current            *prometheus.GaugeVec // apiserver_current_inflight_requests{request_kind}
}

func newInflight(cfg Config, m *metrics.Metrics) (*inflight, error) {
	f := &inflight{current: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_current_inflight_requests",
		Help: "Requests being served now by request kind (readOnly, mutating); long-running requests are not counted.",
	}, []string{"request_kind"})}
	if err := m.Register(f.current); err != nil {
		// A Metrics shared by several servers in one process: they share
		// the gauge too.
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register inflight metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.GaugeVec)
		if !ok {
			return nil, fmt.Errorf("register inflight metrics: %w", err)
		}
		f.current = existing
	}
	if cfg.MaxReadOnlyInflight > 0 {
		f.readOnly = make(chan struct{}, cfg.MaxReadOnlyInflight)
	}
	if cfg.MaxMutatingInflight > 0 {
		f.mutating = make(chan struct{}, cfg.MaxMutatingInflight)
	}
	return f, nil
}

// acquire takes a slot for a request with this method, without waiting.
// ok is false when its kind is at the limit; otherwise release (call it
// once) frees the slot.
func (f *inflight) acquire(method string) (release func(), ok bool) {
	kind, sem := mutatingKind, f.mutating
	if readOnlyMethod(method) {
		kind, sem = readOnlyKind, f.readOnly
	}
	if sem != nil {
		select {
		case sem <- struct{}{}:
		default:
			return nil, false
		}
	}
	g := f.current.WithLabelValues(kind)
	g.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.Dec()
			if sem != nil {
				<-sem
			}
		})
	}, true
}

// readOnlyMethod: kube-apiserver counts get, list and watch as read-only,
// everything else as mutating.
func readOnlyMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// tooManyRequests is kube-apiserver's answer past the limit, with its words.
// (kube-apiserver sends the sentence as text/plain; skiff, whose every
// error is a Status, sends it as the Status message, so a client prints
// the same line.)
func tooManyRequests() *api.StatusError {
	e := api.NewStatusError(http.StatusTooManyRequests, api.ReasonTooManyRequests,
		"Too many requests, please try again later.")
	e.Status.Details = &api.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	return e
}

// requestTimedOut is kube-apiserver's answer to a request past
// --request-timeout.
func requestTimedOut() *api.StatusError {
	return api.NewStatusError(http.StatusGatewayTimeout, api.ReasonTimeout,
		"Timeout: request did not complete within the allotted timeout")
}

// classify resolves r as kube-apiserver's RequestInfo resolver and
// LongRunningRequestCheck do: its requestInfo (the method's verb alone when
// the path is not a resource) and whether it is long-running — a watch, a
// pod's log, exec, attach or portforward, a node proxy, or a snapshot.
func classify(r *http.Request) (requestInfo, bool) {
	ri := requestInfo{verb: strings.ToLower(r.Method)}
	if r.URL.Path == SnapshotPath {
		return ri, true
	}
	if name, _, ok := nodeProxyPath(r.URL.Path); ok {
		ri.kind, ri.name, ri.sub = nodeKind, name, "proxy"
		return ri, true
	}
	if err := parseRequest(r, &ri); err != nil {
		return requestInfo{verb: strings.ToLower(r.Method)}, false
	}
	if ri.verb == "watch" {
		return ri, true
	}
	switch ri.sub {
	case "log", "exec", "attach", "portforward", "proxy":
		return ri, true
	}
	return ri, false
}

// serveShort serves a request that is not long-running under
// Config.RequestTimeout, as kube-apiserver's timeout filter: the handler
// runs in a goroutine of its own (one of handlerPool's) and, when the
// deadline passes first, the client gets 504 at once (or, when the handler
// had begun its answer, a cut connection) and later writes of the handler
// fail. The handler holds its in-flight slot until it returns: release is
// called then. Reads from the connection (a body dribbled slower than the
// timeout) fail at the deadline too. The handler's request is r with
// ctx (the user's: r's own context with the user, serve) under the
// timeout: one copy of r for both.
func (s *Server) serveShort(w http.ResponseWriter, r *http.Request, ctx context.Context, info *requestInfo, ri requestInfo, release func()) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	rc := http.NewResponseController(w)
	// The connection's deadlines fall a little after the request's, so
	// that the 504 (not a read error) is what a client dribbling its body
	// gets, and still reaches it. (Errors: a writer without a connection,
	// as httptest's recorder, has nothing to bound.)
	_ = rc.SetReadDeadline(deadline.Add(timeoutWriteGrace))
	_ = rc.SetWriteDeadline(deadline.Add(timeoutWriteGrace))

	// The handler writes its answer's headers into a copy: after a
	// timeout this goroutine returns while the handler may still run. It
	// shares the request's header, URL and body, as under kube-apiserver's
	// timeout filter: neither side changes them from here on (impersonate
	// has run; net/http only closes the body once this returns, and late
	// reads of it fail), so a deep copy (Request.Clone, 3 % of what a
	// create allocated) would be garbage.
	tw := &timeoutWriter{w: w, header: w.Header().Clone()}
	hr := r.WithContext(ctx)
	hinfo := &requestInfo{verb: info.verb}
	done := make(chan any, 1)
	s.handlers.run(func() {
		defer func() { done <- recover() }()
		defer release() // before done: a finished request has freed its slot
		s.serveAPI(tw, hr, hinfo)
	})
	select {
	case p := <-done:
		*info = *hinfo
		if p != nil {
			panic(p) // net/http recovers and logs it, as for any handler
		}
	case <-ctx.Done():
		*info = ri
		if !tw.timeout() {
			// The answer had begun: the only honest end is a cut
			// connection, which the client sees as a broken response.
			panic(http.ErrAbortHandler)
		}
		s.log.Warn("request timed out", "method", r.Method, "path", r.URL.Path,
			"timeout", s.cfg.RequestTimeout, "remote", r.RemoteAddr)
	}
}

// handlerPool runs short requests' handlers (serveShort) on goroutines
// that stay for the next request. A new goroutine starts with a small
// stack, which a create's handler (admission, validation, JSON both ways)
// grows several times over, copying it at each doubling: 5-7 % of the
// server's CPU in the API benchmark was runtime.copystack under the
// handler goroutines (docs/performance.md, tenth sitting). A handler goes
// to the goroutine that finished last, whose stack is grown, when one is
// waiting, else to a new one; a goroutine waits handlerIdle for another
// handler, then ends. There are never more than the requests served at
// once (the in-flight limits bound them) plus those waiting. The zero
// value is ready to use.
type handlerPool struct {
	mu      sync.Mutex
	idle    []*handlerGoroutine // waiting, the last to finish last
	started atomic.Int64        // goroutines started, ever
	idleFor time.Duration       // how long a goroutine waits; 0: handlerIdle
}

// handlerGoroutine is one of the pool's goroutines.
type handlerGoroutine struct {
	work chan func() // one slot: a handler handed over never waits
}

// handlerIdle is how long a handler goroutine waits for the next request.
const handlerIdle = 30 * time.Second

// run runs f on a waiting goroutine, or on a new one.
func (p *handlerPool) run(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		g := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		g.work <- f
		return
	}
	p.mu.Unlock()
	p.started.Add(1)
	go p.serve(&handlerGoroutine{work: make(chan func(), 1)}, f)
}

// serve is g: it runs f, then what run hands it, until it waits
// handlerIdle in vain.
func (p *handlerPool) serve(g *handlerGoroutine, f func()) {
	wait := cmp.Or(p.idleFor, handlerIdle)
	idle := time.NewTimer(wait)
	defer idle.Stop()
	for {
		f()
		p.mu.Lock()
		p.idle = append(p.idle, g)
		p.mu.Unlock()
		idle.Reset(wait)
		select {
		case f = <-g.work:
		case <-idle.C:
			p.mu.Lock()
			i := slices.Index(p.idle, g)
			if i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return
			}
			f = <-g.work // run took g just now: its handler is on the way
		}
	}
}

// timeoutWriter passes a handler's answer through until timeout; then it
// refuses more. The handler writes headers into a map of its own, copied
// to the real one when it begins its answer, so that the timeout's answer
// and a late handler never touch the same map.
type timeoutWriter struct {
	w      http.ResponseWriter
	header http.Header // the handler's, used by the handler goroutine only

	mu          sync.Mutex
	wroteHeader bool
	timedOut    bool
}

func (tw *timeoutWriter) Header() http.Header { return tw.header }

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut || tw.wroteHeader {
		return
	}
	tw.beginLocked()
	tw.w.WriteHeader(code)
}

func (tw *timeoutWriter) Write(b []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if !tw.wroteHeader {
		tw.beginLocked()
	}
	return tw.w.Write(b)
}

// FlushError lets http.ResponseController flush through the writer.
func (tw *timeoutWriter) FlushError() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(tw.w).Flush()
}

func (tw *timeoutWriter) beginLocked() {
	dst := tw.w.Header()
	for k, v := range tw.header {
		dst[k] = v
	}
	tw.wroteHeader = true
}

// timeout stops the handler's writes and answers 504, unless the handler
// had begun its answer: then it reports false.
func (tw *timeoutWriter) timeout() bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.timedOut = true
	if tw.wroteHeader {
		return false
	}
	// Answer now, without first draining what is left of the body (which
	// net/http does by default, and a client dribbling it would stall).
	_ = http.NewResponseController(tw.w).EnableFullDuplex()
	writeError(tw.w, requestTimedOut())
	return true
}
