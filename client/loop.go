package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/backoff"
)

// A control loop, as every controller, the scheduler and the agent run it:
//
//	informer events ──► Enqueue(key) ──► queue (deduplicated) ──► workers ──► Reconcile(ctx, key)
//	                                       ▲                                         │
//	                                       └──── EnqueueAfter(key, backoff) ◄── error┘
//
// Handlers only enqueue "namespace/name" keys. Reconcile reads the current
// state (usually from an informer's cache), computes what should be, acts,
// and returns. Because it never trusts one event, a missed or repeated
// event costs nothing: the next reconcile of that key sees the truth.
//
// The queue has the semantics of client-go's workqueue:
//   - a key waiting in the queue is there once, however often it is enqueued;
//   - a key is never reconciled by two workers at once; if it is enqueued
//     while being reconciled, it is reconciled once more afterwards;
//   - a failed key comes back after a per-key exponential backoff
//     (client/backoff), reset by the first success;
//   - a periodic resync enqueues every key (SetResyncFunc), which repairs
//     anything a lost event or a bug left behind.

// Reconciler drives the object named by key ("namespace/name", or "name" for
// cluster-scoped objects) toward its desired state. It must be safe to call
// again with the same key at any time (idempotent), and it is never called
// concurrently for the same key. An error requeues the key with backoff;
// return RequeueAfter(d) to look again later without it counting as a failure.
// A key whose object no longer exists should be treated as done (nil).
type Reconciler interface {
	Reconcile(ctx context.Context, key string) error
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, key string) error

// Reconcile implements Reconciler.
func (f ReconcilerFunc) Reconcile(ctx context.Context, key string) error { return f(ctx, key) }

// RequeueAfterError asks the loop to reconcile the key again after After,
// without logging an error or growing the key's backoff. Build it with RequeueAfter.
type RequeueAfterError struct {
	After time.Duration
}

func (e *RequeueAfterError) Error() string { return fmt.Sprintf("requeue after %s", e.After) }

// RequeueAfter is what a Reconcile returns to be called again after d (a
// rollout waiting for minReadySeconds, a pod waiting out its backoff).
func RequeueAfter(d time.Duration) error { return &RequeueAfterError{After: d} }

// LoopMetrics receives the numbers of a loop; the API server's /metrics
// implements it. Calls are fast and never block. A nil LoopMetrics is fine.
type LoopMetrics interface {
	// ObserveReconcile records one reconcile: how long it took and its
	// result (nil, a RequeueAfterError, or a failure).
	ObserveReconcile(controller string, d time.Duration, err error)
	// SetQueueDepth reports the number of keys waiting.
	SetQueueDepth(controller string, n int)
}

// LoopOptions configure a Loop.
type LoopOptions struct {
	// Name of the controller, used in logs and metrics ("deployment-controller").
	Name string
	// Workers reconcile different keys in parallel.
	Workers int
	// Resync enqueues every key from the resync func this often; 0 disables it.
	Resync time.Duration
	// BaseBackoff is the delay after a key's first failure; it doubles with
	// each further failure up to MaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// Log receives one line per failure; nil discards.
	Log *slog.Logger
	// Metrics, or nil.
	Metrics LoopMetrics
}

// ConflictWarnAttempts is the attempt from which a key's optimistic
// concurrency conflicts are logged as warnings; earlier ones at debug.
const ConflictWarnAttempts = 5

// DefaultLoopOptions returns the options most controllers want.
func DefaultLoopOptions(name string) LoopOptions {
	return LoopOptions{
		Name: name,
		// Two workers: a slow reconcile of one key does not stall the rest,
		// and reconciles of one object still never overlap.
		Workers: 2,
		// A minute: long enough to cost nothing on a lab cluster, short
		// enough that a student sees a repair without waiting.
		Resync: time.Minute,
		// 50ms first retry (a conflict usually clears at once), doubling to
		// a minute (a broken object does not flood the log or the server).
		BaseBackoff: 50 * time.Millisecond,
		MaxBackoff:  time.Minute,
	}
}

// Loop is a deduplicating work queue with workers that call a Reconciler.
// Enqueue from any goroutine, before or during Run.
type Loop struct {
	r       Reconciler
	opts    LoopOptions
	backoff backoff.Policy
	log     *slog.Logger

	mu         sync.Mutex
	cond       *sync.Cond
	queue      []string            // keys waiting, in order; each also in dirty
	dirty      map[string]struct{} // keys that need a reconcile
	processing map[string]struct{} // keys a worker holds now
	failures   map[string]int      // consecutive failures per key
	delayed    map[string]*delayedKey
	resync     func() []string
	started    bool
	shutdown   bool
}

type delayedKey struct {
	at    time.Time
	timer *time.Timer
}

// NewLoop returns a loop; zero option fields take DefaultLoopOptions' values
// (a zero Resync stays disabled).
func NewLoop(r Reconciler, opts LoopOptions) *Loop {
	def := DefaultLoopOptions(opts.Name)
	if opts.Workers <= 0 {
		opts.Workers = def.Workers
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = def.BaseBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = def.MaxBackoff
	}
	if opts.MaxBackoff < opts.BaseBackoff {
		opts.MaxBackoff = opts.BaseBackoff
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Loop{
		r:          r,
		opts:       opts,
		backoff:    backoff.Policy{Initial: opts.BaseBackoff, Max: opts.MaxBackoff},
		log:        log.With("controller", opts.Name),
		dirty:      map[string]struct{}{},
		processing: map[string]struct{}{},
		failures:   map[string]int{},
		delayed:    map[string]*delayedKey{},
	}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// KeyFunc is the queue key of an object: "namespace/name", or "name" for
// cluster-scoped objects.
func KeyFunc(obj api.Object) string { return api.KeyOf(obj) }

// SplitKey splits a key made by KeyFunc; a key without "/" is a
// cluster-scoped name.
func SplitKey(key string) (namespace, name string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// SetResyncFunc sets the function that lists every key to resync each
// Resync period (usually: the keys of an informer's cache). Call before Run.
func (l *Loop) SetResyncFunc(f func() []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resync = f
}

// Handler returns informer handlers that enqueue the key of every added,
// updated or deleted object.
func (l *Loop) Handler() Handler {
	return Handler{
		OnAdd:    func(obj api.Object) { l.Enqueue(KeyFunc(obj)) },
		OnUpdate: func(_, obj api.Object) { l.Enqueue(KeyFunc(obj)) },
		OnDelete: func(obj api.Object) { l.Enqueue(KeyFunc(obj)) },
	}
}

// Enqueue asks for key to be reconciled. A key already waiting is not added
// twice; a key being reconciled now is reconciled again afterwards. After
// Run has returned, Enqueue does nothing.
func (l *Loop) Enqueue(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shutdown {
		return
	}
	if _, ok := l.dirty[key]; ok {
		return
	}
	l.dirty[key] = struct{}{}
	if _, ok := l.processing[key]; ok {
		return // requeued by done
	}
	l.queue = append(l.queue, key)
	l.depthChanged()
	l.cond.Signal()
}

// EnqueueAfter enqueues key once d has passed. Of several pending delays
// for one key, the earliest wins.
func (l *Loop) EnqueueAfter(key string, d time.Duration) {
	if d <= 0 {
		l.Enqueue(key)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shutdown {
		return
	}
	at := time.Now().Add(d)
	if p, ok := l.delayed[key]; ok {
		if !p.at.After(at) {
			return
		}
		p.timer.Stop()
	}
	p := &delayedKey{at: at}
	p.timer = time.AfterFunc(d, func() {
		l.mu.Lock()
		if l.delayed[key] == p {
			delete(l.delayed, key)
		}
		l.mu.Unlock()
		l.Enqueue(key)
	})
	l.delayed[key] = p
}

// Len is the number of keys waiting (not counting those being reconciled
// or waiting out a delay).
func (l *Loop) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// Run starts the workers and the resync timer and blocks until ctx ends and
// every worker has returned (an in-flight Reconcile sees ctx canceled).
// A Loop runs once.
func (l *Loop) Run(ctx context.Context) error {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return fmt.Errorf("loop %s: already started", l.opts.Name)
	}
	l.started = true
	resync := l.resync
	l.mu.Unlock()

	var wg sync.WaitGroup
	for range l.opts.Workers {
		wg.Go(func() { l.worker(ctx) })
	}
	if resync != nil && l.opts.Resync > 0 {
		wg.Go(func() { l.resyncLoop(ctx, resync) })
	}
	<-ctx.Done()
	l.stop()
	wg.Wait()
	return nil
}

func (l *Loop) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shutdown = true
	for k, p := range l.delayed {
		p.timer.Stop()
		delete(l.delayed, k)
	}
	l.cond.Broadcast()
}

func (l *Loop) resyncLoop(ctx context.Context, keys func() []string) {
	t := time.NewTicker(l.opts.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, k := range keys() {
				l.Enqueue(k)
			}
		}
	}
}

// get blocks until a key is ready or the loop shuts down.
func (l *Loop) get() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) == 0 && !l.shutdown {
		l.cond.Wait()
	}
	if l.shutdown {
		return "", false
	}
	key := l.queue[0]
	l.queue[0] = ""
	l.queue = l.queue[1:]
	l.processing[key] = struct{}{}
	delete(l.dirty, key)
	l.depthChanged()
	return key, true
}

// done releases key; if it was enqueued meanwhile it goes back in the queue.
func (l *Loop) done(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.processing, key)
	if _, ok := l.dirty[key]; ok && !l.shutdown {
		l.queue = append(l.queue, key)
		l.depthChanged()
		l.cond.Signal()
	}
}

// depthChanged reports the queue depth; l.mu is held.
func (l *Loop) depthChanged() {
	if l.opts.Metrics != nil {
		l.opts.Metrics.SetQueueDepth(l.opts.Name, len(l.queue))
	}
}

func (l *Loop) worker(ctx context.Context) {
	for {
		key, ok := l.get()
		if !ok {
			return
		}
		l.process(ctx, key)
		l.done(key)
	}
}

func (l *Loop) process(ctx context.Context, key string) {
	start := time.Now()
	err := l.reconcile(ctx, key)
	if l.opts.Metrics != nil {
		l.opts.Metrics.ObserveReconcile(l.opts.Name, time.Since(start), err)
	}
	var ra *RequeueAfterError
	switch {
	case err == nil:
		l.forget(key)
	case errors.As(err, &ra):
		l.forget(key)
		l.EnqueueAfter(key, ra.After)
	case ctx.Err() != nil:
		// Shutting down: the error is most likely the cancellation itself.
	default:
		delay, n := l.failed(key)
		// A conflict is optimistic concurrency at work: the retry reads
		// the newer object. Only one that keeps coming back needs a
		// person's attention (the terminal of `skiff up` shows warnings).
		lvl := slog.LevelWarn
		if api.IsConflict(err) && n < ConflictWarnAttempts {
			lvl = slog.LevelDebug
		}
		l.log.Log(ctx, lvl, "reconcile failed", "key", key, "attempt", n, "retryIn", delay, "err", err)
		l.EnqueueAfter(key, delay)
	}
}

// reconcile calls the Reconciler, turning a panic into an error so one bad
// object cannot take the whole process down.
func (l *Loop) reconcile(ctx context.Context, key string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.log.Error("reconcile panicked", "key", key, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("reconcile %s: panic: %v", key, p)
		}
	}()
	return l.r.Reconcile(ctx, key)
}

func (l *Loop) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, key)
}

// failed counts a failure of key and returns the delay before its retry
// and the number of consecutive failures.
func (l *Loop) failed(key string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.failures[key] + 1
	l.failures[key] = n
	return l.backoff.Delay(n), n
}
