package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"skiff.dev/skiff/api"
)

// MaxPermitTimeout caps how long a Permit plugin may make a pod wait, as
// Kubernetes' maxTimeout (15 minutes): a longer wait is cut to this.
const MaxPermitTimeout = 15 * time.Minute

// PermitPlugin runs on the chosen node after Reserve, the last word before
// the pod is bound. It answers one of:
//
//	Success        bind now
//	Wait           hold the pod, assumed on the node (its resources stay
//	               counted), until a plugin calls Allow on its WaitingPod,
//	               or Reject, or the returned timeout passes (then it is
//	               rejected); other pods keep being scheduled meanwhile
//	Unschedulable  do not bind: the pod is unreserved and goes back to the queue
//
// Permit runs on the scheduling goroutine and must not block: a plugin
// that needs to wait returns Wait. Coscheduling is the classic user:
// members of a pod group wait until enough of them are assumed, and the
// last one allows them all.
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) (*Status, time.Duration)
}

// WaitingPod is a pod held at Permit. Allow and Reject are safe to call
// from any goroutine, any number of times: the first decision counts.
type WaitingPod interface {
	// Pod is the assumed pod (spec.nodeName set to its node).
	Pod() *api.Pod
	// NodeName the pod waits on.
	NodeName() string
	// Since is when the pod started to wait.
	Since() time.Time
	// Pending lists the plugins that have not allowed the pod yet, sorted.
	Pending() []string
	// Allow records plugin's yes; the pod is released once every plugin
	// that asked it to wait has allowed it.
	Allow(plugin string)
	// Reject releases the pod with an Unschedulable status whose reason
	// is msg; it will not be bound.
	Reject(plugin, msg string)
}

// WaitingPods is the set of pods waiting at Permit, by pod UID, as
// Kubernetes' waitingPodsMap. A scheduler has one; plugins reach it
// through the handle they are given (IterateOverWaitingPods, GetWaitingPod).
type WaitingPods struct {
	mu   sync.RWMutex
	pods map[string]*waitingPod
}

// NewWaitingPods returns an empty set.
func NewWaitingPods() *WaitingPods { return &WaitingPods{pods: map[string]*waitingPod{}} }

// Get returns the waiting pod with uid, or nil.
func (w *WaitingPods) Get(uid string) WaitingPod {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if p, ok := w.pods[uid]; ok {
		return p
	}
	return nil
}

// Iterate calls f for every waiting pod, in no particular order. f may
// call Allow or Reject.
func (w *WaitingPods) Iterate(f func(WaitingPod)) {
	w.mu.RLock()
	list := slices.Collect(maps.Values(w.pods))
	w.mu.RUnlock()
	for _, p := range list {
		f(p)
	}
}

// Reject rejects the waiting pod with uid (a deleted pod, say); it reports
// whether there was one.
func (w *WaitingPods) Reject(uid, plugin, msg string) bool {
	if p := w.Get(uid); p != nil {
		p.Reject(plugin, msg)
		return true
	}
	return false
}

// Len is how many pods wait.
func (w *WaitingPods) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.pods)
}

func (w *WaitingPods) add(p *waitingPod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods[string(p.pod.UID)] = p
}

func (w *WaitingPods) remove(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
}

type waitingPod struct {
	pod      *api.Pod
	since    time.Time
	timeouts map[string]time.Duration // per plugin, as capped

	mu      sync.Mutex
	pending map[string]*time.Timer // plugin -> its timeout
	done    chan *Status           // buffered 1: the decision
	decided bool
}

func newWaitingPod(pod *api.Pod, waits map[string]time.Duration) *waitingPod {
	wp := &waitingPod{pod: pod, since: time.Now(), timeouts: waits, pending: map[string]*time.Timer{}, done: make(chan *Status, 1)}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for plugin, d := range waits {
		wp.pending[plugin] = time.AfterFunc(d, func() {
			wp.Reject(plugin, fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", d, plugin))
		})
	}
	return wp
}

func (wp *waitingPod) Pod() *api.Pod    { return wp.pod }
func (wp *waitingPod) NodeName() string { return wp.pod.Spec.NodeName }
func (wp *waitingPod) Since() time.Time { return wp.since }

func (wp *waitingPod) Pending() []string {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return slices.Sorted(maps.Keys(wp.pending))
}

func (wp *waitingPod) Allow(plugin string) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if t, ok := wp.pending[plugin]; ok {
		t.Stop()
		delete(wp.pending, plugin)
	}
	if len(wp.pending) == 0 && !wp.decided {
		wp.decided = true
		wp.done <- nil
	}
}

func (wp *waitingPod) Reject(plugin, msg string) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, t := range wp.pending {
		t.Stop()
	}
	if !wp.decided {
		wp.decided = true
		wp.done <- NewStatus(Unschedulable, msg).WithPlugin(plugin)
	}
}

// RunPermit runs every Permit plugin on the chosen node. The first
// rejection or error wins (with the plugin named in the status). When one
// or more plugins ask to wait and none rejects, the pod is added to
// f.Waiting and a Wait status returns: the caller keeps the pod assumed
// and calls WaitOnPermit off the scheduling goroutine.
func (f *Framework) RunPermit(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status {
	waits := map[string]time.Duration{}
	var reasons []string
	for _, p := range f.Permit {
		s, timeout := p.Permit(ctx, state, pod, nodeName)
		switch {
		case s.IsSuccess():
		case s.IsRejected():
			return s.WithPlugin(p.Name())
		case s.Code() == Wait:
			waits[p.Name()] = min(timeout, MaxPermitTimeout)
			reasons = append(reasons, s.Reasons()...)
		default:
			return AsStatus(fmt.Errorf("running Permit plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	if len(waits) == 0 {
		return nil
	}
	if len(reasons) == 0 {
		reasons = []string{"one or more plugins asked to wait and no plugin rejected pod"}
	}
	f.Waiting.add(newWaitingPod(pod, waits))
	return NewStatus(Wait, reasons...)
}

// WaitOnPermit blocks until the pod waiting at Permit is allowed (nil),
// rejected or timed out (Unschedulable, naming the plugin), or ctx ends
// (an Error). A pod that is not waiting returns nil at once.
func (f *Framework) WaitOnPermit(ctx context.Context, pod *api.Pod) *Status {
	uid := string(pod.UID)
	f.Waiting.mu.RLock()
	wp := f.Waiting.pods[uid]
	f.Waiting.mu.RUnlock()
	if wp == nil {
		return nil
	}
	defer f.Waiting.remove(uid)
	select {
	case s := <-wp.done:
		return s
	case <-ctx.Done():
		wp.Reject("", "scheduler stopped")
		return AsStatus(fmt.Errorf("waiting on permit for pod: %w", ctx.Err()))
	}
}
