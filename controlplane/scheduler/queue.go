package scheduler

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/backoff"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// Queue holds the pods waiting for a node, in three parts, as Kubernetes'
// scheduling queue:
//
//	activeQ         ready to try now; highest priority first, then first come first served
//	backoffQ        failed recently; each waits 1s, 2s, 4s ... up to 10s before going back to activeQ
//	unschedulableQ  fit nowhere; they wait for the cluster to change
//
// An unschedulable pod is not retried on a timer: it would fail the same
// way. It is moved back (to activeQ, or to backoffQ if its backoff has not
// run out) when something happens that could make it fit (Move, with a
// ClusterEvent), and only then:
//
//	NodeChanged     a node is added or changes (allocatable, labels, taints,
//	                cordon, readiness): every unschedulable pod moves.
//	ResourcesFreed  a pod leaves a node (deleted, finished, binding failed):
//	                only pods that some node turned away for lack of room
//	                (Insufficient cpu, a host port in use: status
//	                Unschedulable) move. A pod every node rejected for a
//	                reason no departing pod can fix (its nodeSelector or
//	                affinity, a taint, a cordon: UnschedulableAndUnresolvable)
//	                stays; retrying it would fail the same way.
//
// Kubernetes asks each plugin which events matter to which pod ("queueing
// hints"); this is the same idea with one bit per pod, which is what keeps
// a cluster with many pods that can never schedule from retrying all of
// them each time any pod is bound or deleted. As a safety net for changes
// no event reports, Flush moves pods that have waited longer than
// MaxUnschedulable.
//
// A pod popped for a cycle is "in flight". If a move request that would
// have moved it arrives while it is in flight and the cycle then fails, the
// pod goes to backoffQ rather than unschedulableQ, so the change it may
// have missed is not lost.
//
// Pods are keyed by namespace/name. An update replaces the queued pod
// (a spec change also moves it out of unschedulableQ: it may fit now); a
// status-only update (such as the scheduler's own PodScheduled condition)
// never moves it. A delete removes it, even while in flight.
type Queue struct {
	now        func() time.Time
	podBackoff backoff.Policy // podInitialBackoff doubling to podMaxBackoff, by Attempts
	maxUnsched time.Duration

	mu            sync.Mutex
	active        podHeap
	backoff       podHeap
	unschedulable map[string]*QueuedPod
	pods          map[string]*QueuedPod // every pod the queue knows, in flight included
	cycle         int64                 // bumped by each Pop
	nodeCycle     int64                 // cycle of the last NodeChanged
	freedCycle    int64                 // cycle of the last ResourcesFreed
	nominated     map[string]map[string]*framework.PodInfo
	preEnqueue    func(*api.Pod) *framework.Status
	wake          chan struct{}
	closed        bool
}

// QueuedPod is a pod in the queue with its scheduling history.
type QueuedPod struct {
	// QueuedPodInfo: the pod (Info, shared with the informer: never modify
	// Info.Pod) and when it last entered activeQ (Enqueued): what the
	// queue sort plugin compares.
	framework.QueuedPodInfo
	// Attempts counts the scheduling cycles this pod has been through.
	Attempts int
	// LastAttempt is when its last cycle started.
	LastAttempt time.Time
	// UnschedulableSince is when it entered unschedulableQ.
	UnschedulableSince time.Time
	// Cycle is the queue cycle of its last Pop.
	Cycle int64
	// Unresolvable: its last attempt was turned away by every node for
	// reasons only a node change can fix, so ResourcesFreed leaves it in
	// unschedulableQ.
	Unresolvable bool
	// Gated: the PreEnqueue message keeping it out of activeQ ("" when
	// not gated), GatedBy the plugin, GatedSince when that message began.
	Gated      string
	GatedBy    string
	GatedSince time.Time
	// gateReported: the Gated message last handed out by GatedToReport.
	gateReported string

	where int // one of the inX constants
	index int // position in its heap
}

const (
	inNone = iota
	inActive
	inBackoff
	inUnschedulable
	inFlight
)

// ClusterEvent is a change in the cluster that may let unschedulable pods
// fit; see Queue for which pods each one moves.
type ClusterEvent int

const (
	// NodeChanged: a node was added, or changed in a way a filter reads.
	NodeChanged ClusterEvent = iota + 1
	// ResourcesFreed: a pod left a node, freeing its requests and ports.
	ResourcesFreed
	// ClaimsChanged: a ResourceClaim, DeviceClass or ResourceSlice
	// changed (DynamicResources): every unschedulable or gated pod moves.
	ClaimsChanged
)

func (e ClusterEvent) String() string {
	switch e {
	case NodeChanged:
		return "NodeChanged"
	case ResourcesFreed:
		return "ResourcesFreed"
	case ClaimsChanged:
		return "ClaimsChanged"
	}
	return "unknown"
}

// helps reports whether event e may let a pod rejected as qp was fit.
func (e ClusterEvent) helps(unresolvable bool) bool {
	return e == NodeChanged || e == ClaimsChanged || !unresolvable
}

// ErrQueueClosed is returned by Pop after Close.
var ErrQueueClosed = errors.New("scheduling queue closed")

// QueueOptions configure a Queue.
type QueueOptions struct {
	// PodInitialBackoff and PodMaxBackoff bound a failed pod's wait
	// (podInitialBackoffSeconds, podMaxBackoffSeconds).
	PodInitialBackoff, PodMaxBackoff time.Duration
	// MaxUnschedulable: how long a pod waits in unschedulableQ, with no
	// cluster event, before it is tried again anyway.
	MaxUnschedulable time.Duration
	// Less orders activeQ (the profiles' queue sort plugin); nil:
	// PrioritySort's.
	Less func(a, b *framework.QueuedPodInfo) bool
}

// NewQueue returns an empty queue. now may be nil (time.Now).
func NewQueue(o QueueOptions, now func() time.Time) *Queue {
	if now == nil {
		now = time.Now
	}
	if o.Less == nil {
		o.Less = (&plugins.PrioritySort{}).Less
	}
	q := &Queue{
		now:           now,
		podBackoff:    backoff.Policy{Initial: o.PodInitialBackoff, Max: o.PodMaxBackoff},
		maxUnsched:    o.MaxUnschedulable,
		unschedulable: map[string]*QueuedPod{},
		pods:          map[string]*QueuedPod{},
		nominated:     map[string]map[string]*framework.PodInfo{},
		wake:          make(chan struct{}, 1),
	}
	q.active.less = func(a, b *QueuedPod) bool { return o.Less(&a.QueuedPodInfo, &b.QueuedPodInfo) }
	q.backoff.less = func(a, b *QueuedPod) bool { return q.backoffExpiry(a).Before(q.backoffExpiry(b)) }
	return q
}

// Add queues a new pending pod in activeQ (or replaces a known one, as Update).
func (q *Queue) Add(pod *api.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := api.Key(pod.Namespace, pod.Name)
	if qp, ok := q.pods[key]; ok {
		q.updateLocked(qp, pod, specChanged(qp.Info.Pod, pod))
		return
	}
	qp := &QueuedPod{QueuedPodInfo: framework.QueuedPodInfo{Info: framework.NewPodInfo(pod)}}
	q.pods[key] = qp
	q.trackNominatedLocked(qp.Info)
	q.toActiveLocked(qp)
}

// Update replaces a queued pod with its new version. A pod in
// unschedulableQ whose spec changed is moved out: it may fit now. A
// status-only change (such as the scheduler's own PodScheduled condition)
// leaves it where it is.
func (q *Queue) Update(oldPod, newPod *api.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := api.Key(newPod.Namespace, newPod.Name)
	qp, ok := q.pods[key]
	if !ok {
		qp = &QueuedPod{QueuedPodInfo: framework.QueuedPodInfo{Info: framework.NewPodInfo(newPod)}}
		q.pods[key] = qp
		q.trackNominatedLocked(qp.Info)
		q.toActiveLocked(qp)
		return
	}
	q.updateLocked(qp, newPod, specChanged(oldPod, newPod))
}

// specChanged compares specs as JSON: resource.Quantity values that are
// equal may differ inside, so reflect.DeepEqual would see changes that
// are not there.
func specChanged(a, b *api.Pod) bool {
	ja, err1 := json.Marshal(&a.Spec)
	jb, err2 := json.Marshal(&b.Spec)
	return err1 != nil || err2 != nil || !bytes.Equal(ja, jb)
}

func (q *Queue) updateLocked(qp *QueuedPod, pod *api.Pod, specChanged bool) {
	q.untrackNominatedLocked(qp.Info)
	qp.Info = framework.NewPodInfo(pod)
	q.trackNominatedLocked(qp.Info)
	switch qp.where {
	case inActive:
		heap.Fix(&q.active, qp.index) // priority may have changed
	case inBackoff:
		heap.Fix(&q.backoff, qp.index)
	case inUnschedulable:
		if specChanged {
			delete(q.unschedulable, qp.Info.Key)
			q.moveLocked(qp)
		}
	}
}

// Delete removes a pod from the queue, wherever it is.
func (q *Queue) Delete(pod *api.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteLocked(api.Key(pod.Namespace, pod.Name))
}

// Done forgets a pod that left the queue for good (bound, or no longer
// ours to schedule).
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteLocked(key)
}

func (q *Queue) deleteLocked(key string) {
	qp, ok := q.pods[key]
	if !ok {
		return
	}
	switch qp.where {
	case inActive:
		heap.Remove(&q.active, qp.index)
	case inBackoff:
		heap.Remove(&q.backoff, qp.index)
	case inUnschedulable:
		delete(q.unschedulable, key)
	}
	q.untrackNominatedLocked(qp.Info)
	qp.where = inNone
	delete(q.pods, key)
}

// Pop waits for a pod in activeQ and hands it out for one cycle. It
// returns ErrQueueClosed after Close and ctx's error when ctx ends.
func (q *Queue) Pop(ctx context.Context) (*QueuedPod, error) {
	for {
		if qp, err := q.TryPop(); qp != nil || err != nil {
			return qp, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.wake:
		}
	}
}

// TryPop is Pop without waiting: nil when activeQ is empty.
func (q *Queue) TryPop() (*QueuedPod, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrQueueClosed
	}
	if q.active.Len() == 0 {
		return nil, nil
	}
	qp := heap.Pop(&q.active).(*QueuedPod)
	q.cycle++
	qp.Cycle = q.cycle
	qp.Attempts++
	qp.LastAttempt = q.now()
	qp.where = inFlight
	return qp, nil
}

// AddUnschedulable takes back a pod whose cycle found no node.
// unresolvable says every node rejected it for a reason only a node change
// can fix (see Queue). If an event that may help it happened while it was
// in flight, it goes to backoffQ (it may fit now); otherwise to
// unschedulableQ to wait for one. A pod deleted meanwhile is dropped.
func (q *Queue) AddUnschedulable(qp *QueuedPod, unresolvable bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pods[qp.Info.Key] != qp || qp.where != inFlight {
		return
	}
	qp.Unresolvable = unresolvable
	if q.nodeCycle >= qp.Cycle || (q.freedCycle >= qp.Cycle && ResourcesFreed.helps(unresolvable)) {
		q.toBackoffLocked(qp)
		return
	}
	qp.where = inUnschedulable
	qp.UnschedulableSince = q.now()
	q.unschedulable[qp.Info.Key] = qp
}

// AddBackoff takes back a pod whose cycle failed for another reason (an
// internal error, a failed binding): it is retried after its backoff.
func (q *Queue) AddBackoff(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pods[qp.Info.Key] != qp || qp.where != inFlight {
		return
	}
	q.toBackoffLocked(qp)
}

// Move is called on cluster events that may make unschedulable pods fit.
// It moves the pods the event may help (see the type's doc) out of
// unschedulableQ: those whose backoff is over to activeQ, the others to
// backoffQ. The order does not matter: activeQ orders them.
func (q *Queue) Move(e ClusterEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch e {
	case NodeChanged, ClaimsChanged:
		q.nodeCycle = q.cycle
	case ResourcesFreed:
		q.freedCycle = q.cycle
	}
	var moving []*QueuedPod // collected first: a gated pod goes straight back
	for key, qp := range q.unschedulable {
		if e.helps(qp.Unresolvable) {
			delete(q.unschedulable, key)
			moving = append(moving, qp)
		}
	}
	for _, qp := range moving {
		q.moveLocked(qp)
	}
}

// SetPreEnqueue sets the PreEnqueue gate (the framework's PreEnqueue
// plugins): a pod about to enter activeQ that the gate refuses waits in
// unschedulableQ, gated, with the gate's message (Gated), until an event
// moves it and the gate runs again. Call before the first Add.
func (q *Queue) SetPreEnqueue(gate func(*api.Pod) *framework.Status) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.preEnqueue = gate
}

// Gated returns the message of the PreEnqueue gate holding the pod, ""
// when it is not gated.
func (q *Queue) Gated(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[key]; ok && qp.where == inUnschedulable {
		return qp.Gated
	}
	return ""
}

// GatedPod is a pod held by the PreEnqueue gate, for the report that
// tells its user why it waits (gated.go).
type GatedPod struct {
	Pod     *api.Pod
	Plugin  string
	Message string
}

// GatedToReport returns the pods the PreEnqueue gate has held with the
// same message for at least after that have not been returned with that
// message before, and marks them returned.
func (q *Queue) GatedToReport(after time.Duration) []GatedPod {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []GatedPod
	for _, qp := range q.unschedulable {
		if qp.Gated == "" || qp.Gated == qp.gateReported || now.Sub(qp.GatedSince) < after {
			continue
		}
		qp.gateReported = qp.Gated
		out = append(out, GatedPod{Pod: qp.Info.Pod, Plugin: qp.GatedBy, Message: qp.Gated})
	}
	slices.SortFunc(out, func(a, b GatedPod) int {
		return strings.Compare(api.Key(a.Pod.Namespace, a.Pod.Name), api.Key(b.Pod.Namespace, b.Pod.Name))
	})
	return out
}

// moveLocked puts a pod that left unschedulableQ where it belongs.
func (q *Queue) moveLocked(qp *QueuedPod) {
	if q.now().Before(q.backoffExpiry(qp)) {
		q.toBackoffLocked(qp)
	} else {
		q.toActiveLocked(qp)
	}
}

// Flush moves pods whose backoff is over to activeQ, and pods that have
// waited in unschedulableQ longer than MaxUnschedulable back to be tried.
// Run calls it every second.
func (q *Queue) Flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for q.backoff.Len() > 0 {
		qp := q.backoff.items[0]
		if now.Before(q.backoffExpiry(qp)) {
			break
		}
		heap.Pop(&q.backoff)
		q.toActiveLocked(qp)
	}
	var stale []*QueuedPod
	for _, qp := range q.unschedulable {
		if now.Sub(qp.UnschedulableSince) >= q.maxUnsched {
			stale = append(stale, qp)
		}
	}
	slices.SortFunc(stale, func(a, b *QueuedPod) int { return a.UnschedulableSince.Compare(b.UnschedulableSince) })
	for _, qp := range stale {
		delete(q.unschedulable, qp.Info.Key)
		q.moveLocked(qp)
	}
}

// Close wakes Pop and makes it return ErrQueueClosed. Safe twice.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signalLocked()
}

// Where reports which part of the queue holds key: "active", "backoff",
// "unschedulable", "in flight", or "" when the queue does not know it.
func (q *Queue) Where(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[key]
	if !ok {
		return ""
	}
	return [...]string{"", "active", "backoff", "unschedulable", "in flight"}[qp.where]
}

// Len returns the sizes of activeQ, backoffQ and unschedulableQ.
func (q *Queue) Len() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), q.backoff.Len(), len(q.unschedulable)
}

// backoffExpiry is when a pod's backoff ends, as Kubernetes'
// calculateBackoffDuration: podInitialBackoff after the first attempt,
// doubled for each attempt after that, capped at podMaxBackoff, counted
// from the start of its last attempt. A pod never tried has none.
func (q *Queue) backoffExpiry(qp *QueuedPod) time.Time {
	if qp.Attempts == 0 {
		return time.Time{}
	}
	return qp.LastAttempt.Add(q.podBackoff.Delay(qp.Attempts))
}

func (q *Queue) toActiveLocked(qp *QueuedPod) {
	if q.preEnqueue != nil {
		if st := q.preEnqueue(qp.Info.Pod); !st.IsSuccess() {
			if st.Message() != qp.Gated {
				qp.GatedSince = q.now()
			}
			qp.Gated, qp.GatedBy = st.Message(), st.Plugin()
			qp.where = inUnschedulable
			qp.UnschedulableSince = q.now()
			q.unschedulable[qp.Info.Key] = qp
			return
		}
		qp.Gated, qp.GatedBy, qp.gateReported = "", "", ""
	}
	qp.where = inActive
	qp.Enqueued = q.now()
	heap.Push(&q.active, qp)
	q.signalLocked()
}

func (q *Queue) toBackoffLocked(qp *QueuedPod) {
	qp.where = inBackoff
	heap.Push(&q.backoff, qp)
}

func (q *Queue) signalLocked() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Nominate records that preemption made room for pod on node: until the
// pod is bound or deleted, other pods of lower priority are filtered as if
// it were already there, so they cannot take the room it freed.
func (q *Queue) Nominate(pod *framework.PodInfo, node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[pod.Key]
	if !ok {
		return
	}
	q.untrackNominatedLocked(qp.Info)
	q.addNominatedLocked(qp.Info, node)
}

// NominatedPods returns the pods nominated to each node (a copy).
func (q *Queue) NominatedPods() map[string][]*framework.PodInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.nominated) == 0 {
		return nil
	}
	out := make(map[string][]*framework.PodInfo, len(q.nominated))
	for node, pods := range q.nominated {
		for _, p := range pods {
			out[node] = append(out[node], p)
		}
		slices.SortFunc(out[node], func(a, b *framework.PodInfo) int { return strings.Compare(a.Key, b.Key) })
	}
	return out
}

func (q *Queue) trackNominatedLocked(p *framework.PodInfo) {
	if n := p.Pod.Status.NominatedNodeName; n != "" {
		q.addNominatedLocked(p, n)
	}
}

func (q *Queue) addNominatedLocked(p *framework.PodInfo, node string) {
	if q.nominated[node] == nil {
		q.nominated[node] = map[string]*framework.PodInfo{}
	}
	q.nominated[node][p.Key] = p
}

func (q *Queue) untrackNominatedLocked(p *framework.PodInfo) {
	for node, pods := range q.nominated {
		if _, ok := pods[p.Key]; ok {
			delete(pods, p.Key)
			if len(pods) == 0 {
				delete(q.nominated, node)
			}
		}
	}
}

// podHeap is a binary heap of queued pods ordered by less.
type podHeap struct {
	items []*QueuedPod
	less  func(a, b *QueuedPod) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}
func (h *podHeap) Push(x any) {
	qp := x.(*QueuedPod)
	qp.index = len(h.items)
	h.items = append(h.items, qp)
}
func (h *podHeap) Pop() any {
	n := len(h.items)
	qp := h.items[n-1]
	h.items[n-1] = nil
	h.items = h.items[:n-1]
	return qp
}
