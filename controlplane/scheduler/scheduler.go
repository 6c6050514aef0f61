package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/extender"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// SchedulerName is the default profile's scheduler name, the one pods
// get when they name none.
const SchedulerName = config.DefaultSchedulerName

// EventRecorder records Events; *client.Recorder is one. Eventf must not
// block.
type EventRecorder interface {
	Eventf(ctx context.Context, obj api.Object, eventType, reason, format string, args ...any)
}

// Options are the scheduler's collaborators; Config holds its settings.
// Every field may be left zero.
type Options struct {
	// Logger: nil discards.
	Logger *slog.Logger
	// Recorder for Events. nil: a client.Recorder on the scheduler's
	// client, run by Run (component "default-scheduler").
	Recorder EventRecorder
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// BindWorkers: how many bindings (and failure reports) may be in
	// flight at once; 0: DefaultBindWorkers.
	BindWorkers int
	// MaxUnschedulable is how long a pod waits in unschedulableQ, with no
	// cluster event, before it is tried again anyway; 0:
	// DefaultMaxUnschedulable.
	MaxUnschedulable time.Duration
	// AssumedPodTTL: an assumed pod whose binding returned but that the
	// informer never showed bound is dropped after this long; 0:
	// DefaultAssumedPodTTL.
	AssumedPodTTL time.Duration
	// Registry: the plugins profiles may name; nil: plugins.Registry().
	// DefaultPreemption is always added (it is the scheduler's own).
	Registry map[string]plugins.Factory
	// Informers is the process's shared informer factory (the
	// controllers' caches of nodes, pods, PodGroups and the DRA kinds);
	// it is used only when its client is the scheduler's. nil: informers
	// of its own, run by Run.
	Informers *client.InformerFactory
}

// Defaults of Options, with their reasons.
const (
	// DefaultMaxUnschedulable: Kubernetes waits 5 minutes. skiff moves pods
	// on every relevant event, so this net only catches what no event
	// reports; 60s keeps a classroom from waiting long if one is missed.
	DefaultMaxUnschedulable = 60 * time.Second
	// DefaultAssumedPodTTL: Kubernetes once used 30s. A binding the
	// informer never confirms would otherwise hold the node's resources
	// forever.
	DefaultAssumedPodTTL = 30 * time.Second
)

// DefaultBindWorkers is how many bindings may be in flight by default.
// A binding waits for two durable store commits (the binding, then the
// pod's trace), a few milliseconds each with fsync, while a scheduling
// cycle takes well under a millisecond: with few workers the loop waits
// for a free one, and throughput is workers / bind latency. Many writes in
// flight also make the store's group commits bigger, so the fsyncs per
// second stay the same. kube-scheduler does not bound them at all (one
// goroutine per binding); a worker costs only a goroutine.
const DefaultBindWorkers = 256

// Scheduler assigns pending pods to nodes. See the package doc.
type Scheduler struct {
	client    client.Interface
	cfg       *config.Config
	log       *slog.Logger
	recorder  EventRecorder
	ownRec    *client.Recorder // the recorder Run runs, when we made it
	now       func() time.Time
	workers   int
	profiles  map[string]*profile           // by scheduler name
	sources   []framework.EventSourcePlugin // plugins with informers of their own
	informers *client.InformerFactory       // shared (Options.Informers) or the scheduler's own
	ownsInfs  bool                          // informers made by New: Run waits for them
	waiting   *framework.WaitingPods        // pods held at Permit, all profiles
	extenders []*extender.Extender          // HTTP(S) extenders (extenders.go)
	cache     *Cache
	queue     *Queue
	groups    *podGroups           // PodGroups and their members, for Coscheduling (podgroups.go)
	gpus      *plugins.ClaimedGPUs // GPUs claims hold per node (DynamicResources → NodeResourcesFit)
	snap      Snapshot
	nextStart int                                   // round-robin start of the next cycle's node scan
	hints     map[hintsKey]*framework.CompiledHints // hintsOf's, under the queue's lock
	started   atomic.Bool
}

// New builds a scheduler from a configuration (nil: config.Default()),
// making every profile's plugins. It fails, in Kubernetes' words, when a
// profile names a plugin the registry does not have ("ScorePlugin
// \"MyPlugin\" does not exist") or puts one where it does not fit. It
// starts nothing: Run does.
func New(c client.Interface, cfg *config.Config, opts Options) (*Scheduler, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	s := &Scheduler{client: c, cfg: cfg, log: opts.Logger, recorder: opts.Recorder, now: opts.Now, workers: opts.BindWorkers, informers: opts.Informers}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.informers == nil || s.informers.Client() != c {
		s.informers, s.ownsInfs = client.NewInformerFactory(c, s.log), true
	}
	s.log = s.log.With("component", "scheduler")
	if s.now == nil {
		s.now = time.Now
	}
	if s.workers <= 0 {
		s.workers = DefaultBindWorkers
	}
	if s.recorder == nil {
		// kube-scheduler records through the events.k8s.io library:
		// repeats are counted, nothing is combined or dropped.
		s.ownRec = client.NewRecorder(c, SchedulerName, "", s.log).WithoutCorrelation()
		s.recorder = s.ownRec
	}
	ttl := cmp.Or(opts.AssumedPodTTL, DefaultAssumedPodTTL)
	s.cache = NewCache(ttl)
	s.groups = newPodGroups(s.cache)
	s.gpus = plugins.NewClaimedGPUs()
	s.waiting = framework.NewWaitingPods()
	registry := opts.Registry
	if registry == nil {
		registry = plugins.Registry()
	}
	registry = maps.Clone(registry)
	registry[DefaultPreemptionName] = newDefaultPreemption
	// The queue exists before the plugins (Coscheduling activates pods
	// through it); its order comes from the profiles' queue sort plugin.
	var less func(a, b *framework.QueuedPodInfo) bool
	s.queue = NewQueue(QueueOptions{PodInitialBackoff: cfg.PodInitialBackoff, PodMaxBackoff: cfg.PodMaxBackoff,
		MaxUnschedulable: cmp.Or(opts.MaxUnschedulable, DefaultMaxUnschedulable),
		Less:             func(a, b *framework.QueuedPodInfo) bool { return less(a, b) }}, s.now)
	args := plugins.Args{Client: c, Logger: s.log, Informers: s.informers,
		PodGroups: s.groups, WaitingPods: s.waiting, Activate: s.queue.Activate, ClaimedGPUs: s.gpus}
	for _, ec := range cfg.Extenders {
		e, err := extender.New(ec)
		if err != nil {
			return nil, err
		}
		s.extenders = append(s.extenders, e)
	}
	profiles, sources, err := buildProfiles(withExtenderResources(cfg, s.extenders), registry, args)
	if err != nil {
		return nil, fmt.Errorf("initializing profiles: %w", err)
	}
	s.profiles, s.sources = profiles, sources
	for _, p := range profiles {
		less = p.fwk.QueueSort[0].Less // the same plugin in every profile
		break
	}
	s.queue.SetPreEnqueue(s.preEnqueue)
	s.queue.SetRequeue(s.requeue)
	s.hints = map[hintsKey]*framework.CompiledHints{}
	s.queue.SetHintsOf(s.hintsOf)
	return s, nil
}

// preEnqueue runs the PreEnqueue plugins of the pod's profile.
func (s *Scheduler) preEnqueue(pod *api.Pod) *framework.Status {
	p := s.profiles[profileName(pod)]
	if p == nil || len(p.fwk.PreEnqueue) == 0 {
		return nil
	}
	return p.fwk.RunPreEnqueue(context.Background(), pod)
}

// requeue asks the queueing hints of the plugins that rejected a waiting
// pod, in its profile, whether ev may let it fit.
//
// It runs for every waiting pod on every event (each binding is one), so
// the pod's hints are looked up once per attempt and kept with it: they
// depend only on its profile (its Info) and its rejectors.
func (s *Scheduler) requeue(qp *QueuedPod, ev framework.ClusterEvent, oldObj, newObj any) bool {
	h := qp.hints // set with its Rejectors (hintsOf)
	if h == nil {
		h = s.hintsOf(qp)
	}
	return h.Requeue(qp.Info.Pod, ev, oldObj, newObj)
}

// hintsKey: pods of one profile turned away by the same plugins share
// their compiled hints.
type hintsKey struct {
	p         *profile
	rejectors string
}

// hintsOf returns the compiled queueing hints of the plugins that
// rejected a waiting pod, in its profile (AlwaysHints without one): made
// once for each profile and list of rejectors, and shared by their pods
// (the queue groups its unschedulable pods by them). The queue calls it
// under its lock, which guards hints.
func (s *Scheduler) hintsOf(qp *QueuedPod) *framework.CompiledHints {
	p := s.profileOf(qp.Info.Pod)
	k := hintsKey{p, strings.Join(qp.Rejectors, "\x00")}
	if h, ok := s.hints[k]; ok {
		return h
	}
	h := framework.AlwaysHints
	if p != nil {
		h = p.hints.Compile(qp.Rejectors)
	}
	s.hints[k] = &h
	return &h
}

// profileOf returns the pod's profile, nil when it names none of ours.
func (s *Scheduler) profileOf(pod *api.Pod) *profile { return s.profiles[profileName(pod)] }

// Config returns the configuration the scheduler runs.
func (s *Scheduler) Config() *config.Config { return s.cfg }

// Cache returns the scheduler's cache (for tools and tests).
func (s *Scheduler) Cache() *Cache { return s.cache }

// Queue returns the scheduler's queue (for tools and tests).
func (s *Scheduler) Queue() *Queue { return s.queue }

func (s *Scheduler) algorithm(p *profile) *algorithm {
	return &algorithm{fwk: p.fwk, percentage: p.percentage, parallelism: s.cfg.Parallelism, nominated: s.queue.NominatedPods(),
		noVictims: framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonNoVictims), extensions: p.extensions, extenders: s.extenders}
}

// ScheduleOne runs one scheduling decision for pod on snap: PreFilter,
// Filter, Score and, when no node fits, the PostFilter plugins
// (preemption's search). It is pure: it changes neither the cache nor the
// queue and writes nothing. A pod that fits nowhere is not an error: the
// result has no SelectedNode and carries the FailedScheduling message.
// The error is for internal failures (a plugin returned Error) and for a
// pod whose schedulerName names no profile.
func (s *Scheduler) ScheduleOne(ctx context.Context, pod *api.Pod, snap *Snapshot) (*CycleResult, error) {
	p := s.profileOf(pod)
	if p == nil {
		return nil, fmt.Errorf("pod %s: no profile for schedulerName %q", api.Key(pod.Namespace, pod.Name), pod.Spec.SchedulerName)
	}
	a := s.algorithm(p)
	state := framework.NewCycleState()
	res, _, err := a.schedule(ctx, state, pod, snap, 0, s.now)
	if err != nil {
		return nil, err
	}
	if res.SelectedNode == "" && res.NumNodes > 0 {
		if err := a.postFilter(ctx, state, pod, snap, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// task is work for a binding worker: bind an assumed pod, or report a
// failed attempt (status, events, trace, preemption's evictions).
type task struct {
	qp      *QueuedPod
	state   *framework.CycleState
	assumed *framework.PodInfo // nil for a failure report
	node    string
	result  *CycleResult
	err     error // an internal error instead of a result
	// waits: Permit holds the assumed pod; bind waits for its release
	// first, so the task runs on a goroutine of its own (permitwait.go).
	waits  bool
	permit *permitResult        // what Permit did, when it did more than allow at once
	fwk    *framework.Framework // the pod's profile's
}

// scheduleOne is one scheduling cycle for a popped pod. It decides on a
// snapshot, assumes the pod on the chosen node (or puts it back in the
// queue) and returns the slower follow-up work, done by runTask.
func (s *Scheduler) scheduleOne(ctx context.Context, qp *QueuedPod) *task {
	pod := qp.Info.Pod
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || s.cache.IsAssumed(qp.Info.Key) {
		s.queue.Done(qp.Info.Key)
		return nil
	}
	p := s.profileOf(pod)
	if p == nil { // its schedulerName changed to another's: not ours now
		s.queue.Done(qp.Info.Key)
		return nil
	}
	s.cache.Snapshot(&s.snap)
	a := s.algorithm(p)
	a.pooled = true // the task releases the result's arrays (bind, reportUnschedulable)
	state := framework.NewCycleState()
	res, processed, err := a.schedule(ctx, state, pod, &s.snap, s.nextStart, s.now)
	if n := len(s.snap.Nodes()); n > 0 {
		s.nextStart = (s.nextStart + processed) % n
	}
	if err != nil {
		s.log.Error("scheduling cycle failed", "pod", qp.Info.Key, "err", err)
		s.queue.AddBackoff(qp)
		return &task{qp: qp, err: err}
	}
	if res.SelectedNode == "" {
		if res.NumNodes > 0 {
			if err := a.postFilter(ctx, state, pod, &s.snap, res); err != nil {
				s.log.Error("postFilter failed", "pod", qp.Info.Key, "err", err)
			} else if res.Nominated != "" {
				s.queue.Nominate(qp.Info, res.Nominated)
			}
		}
		s.log.Debug("unschedulable", "pod", qp.Info.Key, "message", res.Message)
		// Rejected everywhere for reasons eviction cannot fix: freeing
		// resources cannot help either, only a node change can.
		s.queue.AddUnschedulable(qp, res.rejectors())
		return &task{qp: qp, result: res, fwk: p.fwk}
	}

	// Assume: count the pod on its node now, so the next cycle sees it.
	// A shallow copy is enough: only spec.nodeName differs, and nothing
	// changes the parts it shares with the informer's object.
	bound := *pod
	bound.Spec.NodeName = res.SelectedNode
	assumed := framework.NewPodInfo(&bound)
	if err := s.cache.AssumePod(assumed); err != nil {
		s.log.Error("assume failed", "pod", qp.Info.Key, "err", err)
		s.queue.AddBackoff(qp)
		return nil
	}
	if st := p.fwk.RunReserve(ctx, state, &bound, res.SelectedNode); !st.IsSuccess() {
		s.cache.ForgetPod(assumed.Key)
		s.queue.AddBackoff(qp)
		return &task{qp: qp, err: fmt.Errorf("reserve on node %q: %w", res.SelectedNode, st.AsError())}
	}
	s.log.Debug("assumed", "pod", qp.Info.Key, "node", res.SelectedNode)
	t := &task{qp: qp, state: state, assumed: assumed, node: res.SelectedNode, result: res, fwk: p.fwk}
	if !s.permit(ctx, t) {
		return &task{qp: qp, result: res, err: t.err, permit: t.permit, fwk: p.fwk}
	}
	return t
}

// runTask does a task's I/O: binding, or reporting a failure.
func (s *Scheduler) runTask(ctx context.Context, t *task) {
	switch {
	case t.assumed != nil:
		s.bind(ctx, t)
	case t.err != nil:
		// As kube-scheduler: an error (a failing extender, a plugin's) is
		// the pod's PodScheduled condition with reason SchedulerError.
		cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: ReasonSchedulerError, Message: t.err.Error()}
		if err := s.updateStatus(ctx, t.qp.Info.Pod, cond, ""); err != nil && !api.IsNotFound(err) {
			s.log.Error("update pod status", "pod", t.qp.Info.Key, "err", err)
		}
		s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventWarning, "FailedScheduling", "%v", t.err)
	default:
		s.reportUnschedulable(ctx, t)
	}
}

// bind writes the binding. On failure the assumed pod is forgotten (its
// room freed), Unreserve runs, and the pod is retried after its backoff.
func (s *Scheduler) bind(ctx context.Context, t *task) {
	pod, key := t.assumed.Pod, t.assumed.Key
	if t.waits && !s.waitOnPermit(ctx, t) {
		return
	}
	start := s.now()
	st := t.fwk.RunPreBind(ctx, t.state, pod, t.node) // the claims' allocation first
	if st.IsSuccess() {
		st = s.runBind(ctx, t, pod)
	}
	end := s.now()
	if !st.IsSuccess() {
		err := st.AsError()
		s.log.Info("binding failed", "pod", key, "node", t.node, "err", err)
		t.fwk.RunUnreserve(ctx, t.state, pod, t.node)
		s.cache.ForgetPod(key)
		s.podGone(pod) // the room it held is free again
		if api.IsNotFound(err) {
			s.queue.Done(key)
			return
		}
		s.queue.AddBackoff(t.qp)
		s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventWarning, "FailedScheduling", "Binding rejected: %v", err)
		s.addTrace(ctx, pod, t.spans(start, end, err)...)
		t.result.release()
		return
	}
	s.cache.FinishBinding(key, s.now())
	s.queue.Done(key)
	t.fwk.RunPostBind(ctx, t.state, pod, t.node)
	s.log.Debug("bound", "pod", key, "node", t.node)
	s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, t.node)
	s.addTrace(ctx, pod, t.spans(start, end, nil)...)
	t.result.release()
}

// reportUnschedulable tells the user why the pod waits: the PodScheduled
// condition, a FailedScheduling event, the trace; and carries out what
// preemption decided.
func (s *Scheduler) reportUnschedulable(ctx context.Context, t *task) {
	pod, res := t.qp.Info.Pod, t.result
	nominated := res.Nominated
	if pr := res.Preemption; pr != nil && pr.Node != "" {
		for _, v := range pr.Victims {
			// Only the pod chosen, never a new one that took its name since.
			uid := v.Pod.UID
			err := s.client.Delete(ctx, api.MustKindOf(v.Pod), v.Pod.Namespace, v.Pod.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
			if api.IsConflict(err) {
				continue // already gone; the name belongs to another pod
			}
			if err != nil && !api.IsNotFound(err) {
				s.log.Error("preemption: delete victim", "victim", v.Key, "err", err)
				continue
			}
			s.log.Info("preempted", "victim", v.Key, "by", t.qp.Info.Key, "node", pr.Node)
			s.recorder.Eventf(ctx, v.Pod, api.EventNormal, "Preempted", "Preempted by %s on node %s", t.qp.Info.Key, pr.Node)
		}
	}
	cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: "Unschedulable", Message: res.Message}
	if err := s.updateStatus(ctx, pod, cond, nominated); err != nil && !api.IsNotFound(err) {
		s.log.Error("update pod status", "pod", t.qp.Info.Key, "err", err)
	}
	s.recorder.Eventf(ctx, pod, api.EventWarning, "FailedScheduling", "%s", res.Message)
	s.addTrace(ctx, pod, t.spans(time.Time{}, time.Time{}, nil)...)
	res.release()
}

// updateStatus sets the PodScheduled condition (and nominatedNodeName)
// unless they already say so. It writes the pod's identity and a copy of
// its status (the original belongs to the informer): the status
// subresource takes nothing else, as kube-scheduler patches only the
// status. On a conflict it rereads the pod once.
func (s *Scheduler) updateStatus(ctx context.Context, pod *api.Pod, cond api.PodCondition, nominated string) error {
	for attempt := 0; ; attempt++ {
		if !statusNeedsUpdate(pod, cond, nominated) {
			return nil
		}
		p := &api.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: api.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion}}
		pod.Status.DeepCopyInto(&p.Status)
		setCondition(&p.Status, cond, s.now())
		if nominated != "" {
			p.Status.NominatedNodeName = nominated
		}
		_, err := s.client.UpdateStatus(ctx, p)
		if err == nil || !api.IsConflict(err) || attempt == 1 {
			return err
		}
		fresh, err := client.Get[*api.Pod](ctx, s.client, pod.Namespace, pod.Name)
		if err != nil {
			return err
		}
		pod = fresh
	}
}

func statusNeedsUpdate(pod *api.Pod, cond api.PodCondition, nominated string) bool {
	if nominated != "" && pod.Status.NominatedNodeName != nominated {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == cond.Type {
			return c.Status != cond.Status || c.Reason != cond.Reason || c.Message != cond.Message
		}
	}
	return true
}

func setCondition(st *api.PodStatus, cond api.PodCondition, now time.Time) {
	t := api.NewTime(now.Truncate(time.Second))
	cond.LastProbeTime = t
	cond.LastTransitionTime = t
	for i, c := range st.Conditions {
		if c.Type == cond.Type {
			if c.Status == cond.Status {
				cond.LastTransitionTime = c.LastTransitionTime
			}
			st.Conditions[i] = cond
			return
		}
	}
	st.Conditions = append(st.Conditions, cond)
}

func (s *Scheduler) addTrace(ctx context.Context, pod *api.Pod, spans ...api.TraceSpan) {
	if len(spans) == 0 {
		return
	}
	if err := s.client.AddTrace(ctx, pod.Namespace, pod.Name, spans...); err != nil && !api.IsNotFound(err) {
		s.log.Debug("add trace", "pod", api.Key(pod.Namespace, pod.Name), "err", err)
	}
}
