package scheduler

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
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
//	activeQ         ready to try now; ordered by the queue sort plugin
//	                (PrioritySort: highest priority first, then first come)
//	backoffQ        failed recently; each waits 1s, 2s, 4s ... up to 10s before going back to activeQ
//	unschedulableQ  fit nowhere; they wait for the cluster to change
//
// An unschedulable pod is not retried on a timer: it would fail the same
// way. It remembers the plugins that turned it away (Rejectors: the
// PreFilter plugin, or each node's rejecting Filter plugin, or the
// PreEnqueue gate), and is moved back (to activeQ, or to backoffQ if its
// backoff has not run out) only when a cluster event comes (Move) that
// one of those plugins says may help it: Kubernetes' queueing hints
// (framework/events.go). A GPU pod rejected for "Insufficient
// nvidia.com/gpu" moves when a pod holding GPUs goes away or a node with
// GPUs comes, not when a label changes; a pod whose nodeSelector no node
// matches moves when a node's labels change, not when a pod is deleted.
// A plugin that registers no hints gets every event. As a safety net for
// changes no event reports, Flush moves pods that have waited longer than
// MaxUnschedulable.
//
// A pod popped for a cycle is "in flight". Events that arrive while some
// pod is in flight are kept; when a cycle fails, the pod's hints are asked
// about the events it missed, and if one may help it goes to backoffQ
// rather than unschedulableQ, so the change is not lost.
//
// Pods are keyed by namespace/name. An update replaces the queued pod (a
// change of its spec, labels or generated claims also moves it out of
// unschedulableQ: it may fit now); another status-only update (such as the
// scheduler's own PodScheduled condition) never moves it. A delete removes
// it, even while in flight.
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
	inFlight      int                   // pods popped and not back yet
	missed        []queuedEvent         // events while pods were in flight
	missedLost    int64                 // the cycle up to which events were dropped (too many)
	requeue       RequeueFunc
	// hintsOf and byHints: with SetHintsOf, the unschedulable pods are
	// also kept by their hints, so that an event no registration of a
	// group matches (a binding, for pods a nodeSelector keeps out) passes
	// that group by without looking at its pods.
	hintsOf    func(*QueuedPod) *framework.CompiledHints
	byHints    map[*framework.CompiledHints]map[string]*QueuedPod
	nominated  map[string]map[string]*framework.PodInfo
	preEnqueue func(*api.Pod) *framework.Status
	wake       chan struct{}
	closed     bool
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
	// Rejectors: the plugins that turned its last attempt away (or gate
	// it): only their queueing hints can move it. None: any event does.
	Rejectors []string
	// Gated: the PreEnqueue message keeping it out of activeQ ("" when
	// not gated), GatedBy the plugin, GatedSince when that message began.
	Gated      string
	GatedBy    string
	GatedSince time.Time
	// gateReported: the Gated message last handed out by GatedToReport.
	gateReported string
	// hints: the queueing hints of Rejectors in its profile (SetHintsOf),
	// set when Rejectors are; shared by every pod with the same ones.
	hints *framework.CompiledHints

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

// RequeueFunc reports whether a cluster event may let a waiting pod fit:
// the queueing hints of the plugins that rejected it (the scheduler asks
// its pod's profile). It runs under the queue's lock and must be quick.
type RequeueFunc func(qp *QueuedPod, ev framework.ClusterEvent, oldObj, newObj any) bool

// queuedEvent is an event kept for the pods in flight.
type queuedEvent struct {
	cycle          int64 // the queue's cycle when it came
	ev             framework.ClusterEvent
	oldObj, newObj any
}

// maxMissed bounds the events kept while pods are in flight (a gang held
// at Permit can stay in flight a while); past it, a failed pod simply
// goes to backoffQ.
const maxMissed = 4096

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

// SetRequeue sets the function that decides, from the rejecting plugins'
// queueing hints, which waiting pods an event moves. Without one every
// event moves every waiting pod. Call before the first Add.
func (q *Queue) SetRequeue(f RequeueFunc) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.requeue = f
}

// SetHintsOf sets the function that gives a waiting pod's compiled
// queueing hints (one value for every pod with the same profile and
// rejectors; it runs under the queue's lock). Move then skips the pods
// whose hints register nothing for the event; the RequeueFunc decides
// for the others. Call before the first Add.
func (q *Queue) SetHintsOf(f func(*QueuedPod) *framework.CompiledHints) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hintsOf = f
	q.byHints = map[*framework.CompiledHints]map[string]*QueuedPod{}
}

// putUnschedulableLocked puts qp, its Rejectors set, in unschedulableQ.
func (q *Queue) putUnschedulableLocked(qp *QueuedPod) {
	qp.where = inUnschedulable
	qp.UnschedulableSince = q.now()
	q.unschedulable[qp.Info.Key] = qp
	if q.hintsOf != nil {
		m := q.byHints[qp.hints]
		if m == nil {
			m = map[string]*QueuedPod{}
			q.byHints[qp.hints] = m
		}
		m[qp.Info.Key] = qp
	}
}

// dropUnschedulableLocked takes qp out of unschedulableQ.
func (q *Queue) dropUnschedulableLocked(qp *QueuedPod) {
	delete(q.unschedulable, qp.Info.Key)
	if m := q.byHints[qp.hints]; m != nil {
		delete(m, qp.Info.Key)
		if len(m) == 0 {
			delete(q.byHints, qp.hints)
		}
	}
}

// setRejectorsLocked records the plugins that turned qp away, and their hints.
func (q *Queue) setRejectorsLocked(qp *QueuedPod, rejectors []string) {
	qp.Rejectors = rejectors
	if q.hintsOf != nil {
		qp.hints = q.hintsOf(qp)
	}
}

func (q *Queue) helps(qp *QueuedPod, ev framework.ClusterEvent, oldObj, newObj any) bool {
	return q.requeue == nil || q.requeue(qp, ev, oldObj, newObj)
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
		q.updateLocked(qp, pod, podUpdateMatters(qp.Info.Pod, pod))
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
	q.updateLocked(qp, newPod, podUpdateMatters(oldPod, newPod))
}

// podUpdateMatters reports whether a pending pod's update may change its
// fate: its spec, labels (affinity to itself, spread) or the claims made
// for it (status.resourceClaimStatuses, which the DynamicResources gate
// waits for).
func podUpdateMatters(a, b *api.Pod) bool {
	return specChanged(a, b) || !maps.Equal(a.Labels, b.Labels) ||
		!reflect.DeepEqual(a.Status.ResourceClaimStatuses, b.Status.ResourceClaimStatuses)
}

// specChanged compares specs as JSON: resource.Quantity values that are
// equal may differ inside, so reflect.DeepEqual would see changes that
// are not there.
func specChanged(a, b *api.Pod) bool {
	ja, err1 := json.Marshal(&a.Spec)
	jb, err2 := json.Marshal(&b.Spec)
	return err1 != nil || err2 != nil || !bytes.Equal(ja, jb)
}

func (q *Queue) updateLocked(qp *QueuedPod, pod *api.Pod, matters bool) {
	q.untrackNominatedLocked(qp.Info)
	qp.Info = framework.NewPodInfo(pod)
	q.trackNominatedLocked(qp.Info)
	switch qp.where {
	case inActive:
		heap.Fix(&q.active, qp.index) // priority may have changed
	case inBackoff:
		heap.Fix(&q.backoff, qp.index)
	case inUnschedulable:
		if matters {
			q.dropUnschedulableLocked(qp)
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
		q.dropUnschedulableLocked(qp)
	case inFlight:
		q.landedLocked()
	}
	q.untrackNominatedLocked(qp.Info)
	qp.where = inNone
	delete(q.pods, key)
}

// Pop waits for a pod in activeQ and hands it out for one cycle. It
// returns ErrQueueClosed after Close and ctx's error when ctx ends.
// While it waits it also wakes when the first pod in backoffQ ends its
// backoff and moves it to activeQ: a pod is retried when its backoff is
// over, not at the next Flush tick (up to a second later).
func (q *Queue) Pop(ctx context.Context) (*QueuedPod, error) {
	for {
		if qp, err := q.TryPop(); qp != nil || err != nil {
			return qp, err
		}
		var due <-chan time.Time
		stop := func() {}
		if d, ok := q.nextBackoff(); ok {
			timer := time.NewTimer(d)
			due, stop = timer.C, func() { timer.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-q.wake:
			stop()
		case <-due:
			q.flushBackoff()
		}
	}
}

// nextBackoff is how long until the first pod in backoffQ may be tried;
// false when backoffQ is empty.
func (q *Queue) nextBackoff() (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.backoff.Len() == 0 {
		return 0, false
	}
	return max(q.backoffExpiry(q.backoff.items[0]).Sub(q.now()), 0), true
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
	q.inFlight++
	return qp, nil
}

// landedLocked notes that a pod left the in-flight state; with none left
// in flight, the kept events are no longer needed.
func (q *Queue) landedLocked() {
	q.inFlight--
	if q.inFlight <= 0 {
		q.inFlight = 0
		q.missed, q.missedLost = q.missed[:0], 0
	}
}

// AddUnschedulable takes back a pod whose cycle found no node. rejectors
// are the plugins that turned it away. If an event that one of them says
// may help it came while it was in flight, it goes to backoffQ (it may fit
// now); otherwise to unschedulableQ to wait for one. A pod deleted
// meanwhile is dropped.
func (q *Queue) AddUnschedulable(qp *QueuedPod, rejectors []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pods[qp.Info.Key] != qp || qp.where != inFlight {
		return
	}
	q.setRejectorsLocked(qp, rejectors)
	missed := q.missedHelpsLocked(qp)
	q.landedLocked()
	if missed {
		q.toBackoffLocked(qp)
		return
	}
	q.putUnschedulableLocked(qp)
}

// missedHelpsLocked reports whether an event kept since qp was popped may
// help it.
func (q *Queue) missedHelpsLocked(qp *QueuedPod) bool {
	if q.missedLost >= qp.Cycle {
		return true // events were dropped: assume one helps
	}
	for _, e := range q.missed {
		if e.cycle >= qp.Cycle && q.helps(qp, e.ev, e.oldObj, e.newObj) {
			return true
		}
	}
	return false
}

// AddBackoff takes back a pod whose cycle failed for another reason (an
// internal error, a failed binding): it is retried after its backoff.
func (q *Queue) AddBackoff(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pods[qp.Info.Key] != qp || qp.where != inFlight {
		return
	}
	q.landedLocked()
	q.toBackoffLocked(qp)
}

// Move is called on a cluster event (oldObj → newObj; nil for Add and
// Delete respectively) that may let waiting pods fit. It moves the pods
// the event may help, by the queueing hints of the plugins that rejected
// them, out of unschedulableQ: those whose backoff is over to activeQ,
// the others to backoffQ. The order does not matter: activeQ orders them.
// It returns how many pods it moved.
func (q *Queue) Move(ev framework.ClusterEvent, oldObj, newObj any) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight > 0 {
		if len(q.missed) < maxMissed {
			q.missed = append(q.missed, queuedEvent{cycle: q.cycle, ev: ev, oldObj: oldObj, newObj: newObj})
		} else {
			q.missedLost = q.cycle
		}
	}
	var moving []*QueuedPod // collected first: a gated pod goes straight back
	if q.hintsOf == nil {
		for _, qp := range q.unschedulable {
			if q.helps(qp, ev, oldObj, newObj) {
				moving = append(moving, qp)
			}
		}
	} else {
		for h, pods := range q.byHints {
			if !h.MayRequeue(ev) {
				continue // no registration for ev: no pod of this group moves
			}
			for _, qp := range pods {
				if q.helps(qp, ev, oldObj, newObj) {
					moving = append(moving, qp)
				}
			}
		}
	}
	for _, qp := range moving {
		q.dropUnschedulableLocked(qp)
	}
	for _, qp := range moving {
		q.moveLocked(qp)
	}
	return len(moving)
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
	q.flushBackoffLocked(now)
	var stale []*QueuedPod
	for _, qp := range q.unschedulable {
		if now.Sub(qp.UnschedulableSince) >= q.maxUnsched {
			stale = append(stale, qp)
		}
	}
	slices.SortFunc(stale, func(a, b *QueuedPod) int { return a.UnschedulableSince.Compare(b.UnschedulableSince) })
	for _, qp := range stale {
		q.dropUnschedulableLocked(qp)
		q.moveLocked(qp)
	}
}

// flushBackoff moves the pods whose backoff is over to activeQ.
func (q *Queue) flushBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushBackoffLocked(q.now())
}

func (q *Queue) flushBackoffLocked(now time.Time) {
	for q.backoff.Len() > 0 {
		qp := q.backoff.items[0]
		if now.Before(q.backoffExpiry(qp)) {
			break
		}
		heap.Pop(&q.backoff)
		q.toActiveLocked(qp)
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
			q.setRejectorsLocked(qp, []string{st.Plugin()})
			q.putUnschedulableLocked(qp)
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
	q.signalLocked() // Pop sets its timer for the new first expiry
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
