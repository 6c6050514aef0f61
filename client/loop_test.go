package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// runLoop runs l until the test ends and checks that Run returns.
func runLoop(t *testing.T, l *client.Loop) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
}

// recorder is a Reconciler that records calls and answers from a script.
type recorder struct {
	mu     sync.Mutex
	calls  []string
	answer func(key string, n int) error // n: calls so far for key, from 1
	counts map[string]int
}

func (r *recorder) Reconcile(ctx context.Context, key string) error {
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[key]++
	n := r.counts[key]
	r.calls = append(r.calls, key)
	answer := r.answer
	r.mu.Unlock()
	if answer != nil {
		return answer(key, n)
	}
	return nil
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

func (r *recorder) history() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func fastOptions(name string) client.LoopOptions {
	return client.LoopOptions{Name: name, Workers: 1, BaseBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
}

func TestLoopDeduplicates(t *testing.T) {
	r := &recorder{}
	l := client.NewLoop(r, fastOptions("dedup"))
	for range 5 {
		l.Enqueue("ns/a")
	}
	l.Enqueue("ns/b")
	if l.Len() != 2 {
		t.Fatalf("Len = %d, want 2", l.Len())
	}
	runLoop(t, l)
	testwait.For(t, 10*time.Second, "a and b reconciled", func() bool { return r.count("ns/b") == 1 })
	// One worker and FIFO order: "ns/b" came after every "ns/a".
	if got := r.history(); len(got) != 2 || got[0] != "ns/a" {
		t.Errorf("calls = %v, want [ns/a ns/b]", got)
	}
}

func TestLoopNeverProcessesAKeyTwiceAtOnce(t *testing.T) {
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		maxSeen  int
		calls    int
	)
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	r := client.ReconcilerFunc(func(ctx context.Context, key string) error {
		mu.Lock()
		inFlight[key]++
		maxSeen = max(maxSeen, inFlight[key])
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			started <- struct{}{}
			<-release
		}
		mu.Lock()
		inFlight[key]--
		mu.Unlock()
		return nil
	})
	opts := fastOptions("exclusive")
	opts.Workers = 4
	l := client.NewLoop(r, opts)
	runLoop(t, l)
	l.Enqueue("k")
	<-started
	// Enqueued while being processed: marked dirty, not handed to another worker.
	l.Enqueue("k")
	l.Enqueue("k")
	if l.Len() != 0 {
		t.Errorf("Len = %d while the key is processing, want 0", l.Len())
	}
	close(release)
	testwait.For(t, 10*time.Second, "second reconcile", func() bool { mu.Lock(); defer mu.Unlock(); return calls == 2 })
	mu.Lock()
	defer mu.Unlock()
	if maxSeen != 1 {
		t.Errorf("a key was reconciled by %d workers at once", maxSeen)
	}
}

type fakeMetrics struct {
	mu        sync.Mutex
	observed  []error
	lastDepth int
}

func (m *fakeMetrics) ObserveReconcile(_ string, _ time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observed = append(m.observed, err)
}

func (m *fakeMetrics) SetQueueDepth(_ string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastDepth = n
}

func TestLoopBackoffAndRequeueAfter(t *testing.T) {
	errBoom := errors.New("boom")
	r := &recorder{answer: func(key string, n int) error {
		switch {
		case key == "fail" && n <= 3:
			return errBoom
		case key == "later" && n == 1:
			return client.RequeueAfter(2 * time.Millisecond)
		case key == "panic" && n == 1:
			panic("bad object")
		}
		return nil
	}}
	m := &fakeMetrics{}
	opts := fastOptions("backoff")
	opts.Metrics = m
	l := client.NewLoop(r, opts)
	runLoop(t, l)
	l.Enqueue("fail")
	l.Enqueue("later")
	l.Enqueue("panic")
	testwait.For(t, 10*time.Second, "fail retried until success", func() bool { return r.count("fail") == 4 })
	testwait.For(t, 10*time.Second, "later requeued", func() bool { return r.count("later") == 2 })
	testwait.For(t, 10*time.Second, "panic retried", func() bool { return r.count("panic") == 2 })
	testwait.For(t, 10*time.Second, "metrics", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return len(m.observed) == 8 })
	m.mu.Lock()
	defer m.mu.Unlock()
	var failures, requeues int
	for _, err := range m.observed {
		var ra *client.RequeueAfterError
		switch {
		case errors.As(err, &ra):
			requeues++
		case err != nil:
			failures++
		}
	}
	if failures != 4 || requeues != 1 {
		t.Errorf("failures = %d, requeues = %d; want 4 and 1", failures, requeues)
	}
	if m.lastDepth != 0 {
		t.Errorf("queue depth = %d, want 0", m.lastDepth)
	}
}

func TestLoopBackoffGrows(t *testing.T) {
	l := client.NewLoop(&recorder{}, client.LoopOptions{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 35 * time.Millisecond})
	want := []time.Duration{10, 20, 35, 35}
	for i, w := range want {
		if got := client.BackoffFor(l, "k"); got != w*time.Millisecond {
			t.Errorf("failure %d: backoff %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := client.BackoffFor(l, "other"); got != 10*time.Millisecond {
		t.Errorf("backoff is not per key: %v", got)
	}
}

func TestLoopResync(t *testing.T) {
	r := &recorder{}
	opts := fastOptions("resync")
	opts.Resync = 2 * time.Millisecond
	l := client.NewLoop(r, opts)
	l.SetResyncFunc(func() []string { return []string{"x", "y"} })
	runLoop(t, l)
	testwait.For(t, 10*time.Second, "periodic resync", func() bool { return r.count("x") >= 2 && r.count("y") >= 2 })
}

func TestLoopRunOnceAndStop(t *testing.T) {
	r := &recorder{}
	l := client.NewLoop(r, fastOptions("stop"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := l.Run(t.Context()); err == nil {
		t.Error("second Run succeeded")
	}
	l.Enqueue("late")
	l.EnqueueAfter("late", time.Millisecond)
	if l.Len() != 0 {
		t.Errorf("Enqueue after Run returned: Len = %d", l.Len())
	}
}

func TestSplitKey(t *testing.T) {
	tests := []struct{ key, ns, name string }{
		{"default/web", "default", "web"},
		{"node-1", "", "node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			ns, name := client.SplitKey(tt.key)
			if ns != tt.ns || name != tt.name {
				t.Errorf("SplitKey(%q) = %q, %q", tt.key, ns, name)
			}
		})
	}
}

// A retried optimistic concurrency conflict is not a warning (skiff up's
// terminal shows warnings); a conflict that keeps coming back is, and so
// is any other failure.
func TestLoopConflictsLoggedAtDebugUntilTheyPersist(t *testing.T) {
	conflict := api.NewStatusError(409, api.ReasonConflict, `Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again`)
	r := &recorder{answer: func(key string, n int) error {
		switch {
		case key == "once" && n == 1:
			return fmt.Errorf("update status: %w", conflict)
		case key == "always" && n <= client.ConflictWarnAttempts:
			return conflict
		case key == "other" && n == 1:
			return errors.New("boom")
		}
		return nil
	}}
	var buf lockedLog
	opts := fastOptions("conflicts")
	opts.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l := client.NewLoop(r, opts)
	runLoop(t, l)
	l.Enqueue("once")
	testwait.For(t, 10*time.Second, "once retried", func() bool { return r.count("once") == 2 })
	if s := buf.String(); s != "" {
		t.Fatalf("a retried conflict warned: %s", s)
	}
	l.Enqueue("always")
	l.Enqueue("other")
	testwait.For(t, 10*time.Second, "always and other retried", func() bool {
		return r.count("always") == client.ConflictWarnAttempts+1 && r.count("other") == 2
	})
	s := buf.String()
	if strings.Count(s, "key=always") != 1 || !strings.Contains(s, fmt.Sprintf("key=always attempt=%d", client.ConflictWarnAttempts)) || strings.Count(s, "key=other") != 1 {
		t.Errorf("warnings:\n%s", s)
	}
}

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
