package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The DaemonSet controller runs one pod of a DaemonSet on every node that
// should run one, as Kubernetes' (pkg/controller/daemon). One reconcile of
// one DaemonSet:
//
//  1. History: the ControllerRevision of the current pod template
//     (history.go). Its hash labels every pod made from it
//     (controller-revision-hash): a pod with another hash is old.
//  2. Claim the pods (controller reference and selector, as ReplicaSets
//     do) and group them by the node each is for: spec.nodeName once the
//     pod is bound, before that the node its affinity names.
//  3. Decide per node (nodeShouldRun): should a daemon pod run there, and
//     may one that runs there stay? The template's nodeSelector and
//     required node affinity must match the node's labels, and the node's
//     NoSchedule and NoExecute taints must be tolerated: by the template,
//     or by the tolerations the controller adds to every daemon pod
//     (not-ready and unreachable NoExecute; disk-, memory-, pid-pressure
//     and unschedulable NoSchedule; network-unavailable for hostNetwork).
//     A pod that runs may stay while only NoSchedule taints go
//     untolerated. So a cordoned or drained node keeps its daemon pod, and
//     a node that is not ready or unreachable is never emptied of it.
//  4. Manage: a node that should run a pod and has none gets one. The
//     controller does not bind it: it replaces the pod's required node
//     affinity by one term, matchFields metadata.name In [NODE], and the
//     scheduler places it there (Kubernetes does so since 1.12, so the
//     scheduler's resource checks and preemption apply). A failed pod is
//     deleted (FailedDaemonPod, with backoff: 1 s doubling to 15 min per
//     node), so is a succeeded one; of several pods on one node the oldest
//     stays; pods on nodes that should not run them are deleted. A new
//     pod for a node waits until its old one is gone.
//  5. Update (daemonset_update.go): once nothing is left to create or
//     delete and the cache shows our last writes, RollingUpdate replaces
//     pods of old revisions within maxUnavailable (or, with maxSurge,
//     starts the new pod beside the old one). OnDelete replaces a pod only
//     when someone deletes it.
//  6. History beyond revisionHistoryLimit goes (never a revision a pod
//     still runs).
//  7. Status: desiredNumberScheduled, currentNumberScheduled,
//     numberMisscheduled, numberReady, updatedNumberScheduled,
//     numberAvailable, numberUnavailable.
//
// Events are daemonset-controller's: SuccessfulCreate "Created pod: NAME",
// SuccessfulDelete "Deleted pod: NAME", FailedCreate, FailedDaemonPod
// "Found failed daemon pod NS/NAME on node N, will try to kill it",
// SucceededDaemonPod, SelectingAll.
type DaemonSetController struct {
	client client.Interface
	dsets  Lister // *api.DaemonSet
	revs   Lister // *api.ControllerRevision
	pods   Lister // *api.Pod
	nodes  Lister // *api.Node
	events EventRecorder
	log    *slog.Logger
	expect *expectations

	mu     sync.Mutex
	failed map[string]podBackoff // failed-pod deletions, by DaemonSet uid/generation/node
	// now is the clock (tests set it).
	now func() time.Time
}

const daemonSetControllerName = "daemonset-controller"

// daemonSetBurst bounds the pods one reconcile creates or deletes
// (Kubernetes' BurstReplicas for daemon sets).
const daemonSetBurst = 250

// Failed daemon pods are deleted at most this often per node: Kubernetes'
// failedPodsBackoff (1 s doubling to 15 min).
const (
	failedPodBackoff    = time.Second
	failedPodBackoffMax = 15 * time.Minute
)

func daemonSetKind() *api.Kind { return api.MustKindOf(&api.DaemonSet{}) }

// NewDaemonSetController returns the controller; the listers are caches of
// all namespaces (nodes: all nodes).
func NewDaemonSetController(c client.Interface, dsets, revs, pods, nodes Lister, events EventRecorder, log *slog.Logger) *DaemonSetController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexControllers(pods) // claimCandidates
	if events == nil {
		events = nopRecorder{}
	}
	return &DaemonSetController{
		client: c,
		dsets:  dsets,
		revs:   revs,
		pods:   pods,
		nodes:  nodes,
		events: events,
		log:    log.With("controller", daemonSetControllerName),
		expect: newExpectations(),
		failed: map[string]podBackoff{},
		now:    time.Now,
	}
}

// PodHandler enqueues the DaemonSet a pod belongs to, and for an orphan
// every DaemonSet whose selector matches it (it may be adopted).
func (d *DaemonSetController) PodHandler(enqueue func(key string)) client.Handler {
	return ownedHandler("DaemonSet", enqueue, func(ns string, set labels.Set) []string {
		var keys []string
		for _, ds := range listAs[*api.DaemonSet](d.dsets.ListBy(nil, ns)) {
			if sel, err := ds.Spec.Selector.AsSelector(); err == nil && !sel.Empty() && sel.Matches(set) {
				keys = append(keys, api.KeyOf(ds))
			}
		}
		return keys
	})
}

// RevisionHandler enqueues the DaemonSet of a ControllerRevision (one
// deleted by hand is made again).
func (d *DaemonSetController) RevisionHandler(enqueue func(key string)) client.Handler {
	return ownedHandler("DaemonSet", enqueue, func(string, labels.Set) []string { return nil })
}

// NodeHandler enqueues every DaemonSet when a node appears or goes, or
// when what decides its daemon pods changes: labels, taints,
// unschedulable. Heartbeats change none of these and enqueue nothing.
func (d *DaemonSetController) NodeHandler(enqueue func(key string)) client.Handler {
	all := func(api.Object) {
		for _, ds := range d.dsets.ListBy(nil, "") {
			enqueue(api.KeyOf(ds))
		}
	}
	return client.Handler{
		OnAdd: all,
		OnUpdate: func(old, cur api.Object) {
			o, n := old.(*api.Node), cur.(*api.Node)
			if !maps.Equal(o.Labels, n.Labels) || !slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, sameTaint) || o.Spec.Unschedulable != n.Spec.Unschedulable {
				all(cur)
			}
		},
		OnDelete: all,
	}
}

func sameTaint(a, b api.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// ownedHandler enqueues the owner of kind of an object (its controller
// reference), before and after an update, and for an orphan the keys
// matching returns (owners whose selector matches its labels).
func ownedHandler(kind string, enqueue func(string), matching func(ns string, set labels.Set) []string) client.Handler {
	h := func(obj api.Object) {
		m := obj.GetObjectMeta()
		if ref := api.ControllerOf(obj); ref != nil {
			if ref.Kind == kind {
				enqueue(api.Key(m.Namespace, ref.Name))
			}
			return
		}
		for _, k := range matching(m.Namespace, labels.Set(m.Labels)) {
			enqueue(k)
		}
	}
	return client.Handler{
		OnAdd: h,
		OnUpdate: func(old, cur api.Object) {
			h(cur)
			if ref := api.ControllerOf(old); ref != nil && ref.Kind == kind {
				enqueue(api.Key(old.GetObjectMeta().Namespace, ref.Name))
			}
		},
		OnDelete: h,
	}
}

// dsSync is what one reconcile knows about one DaemonSet.
type dsSync struct {
	ds    *api.DaemonSet
	key   string
	hash  string                // of the current revision
	pod   *api.Pod              // a daemon pod as the template makes it (tolerations added), for the node checks
	nodes []*api.Node           // every node
	pods  map[string][]*api.Pod // claimed pods by the node they are for
	now   time.Time
	// requeue asks to look again (failed-pod backoff, minReadySeconds).
	requeue time.Duration
}

// Reconcile drives the DaemonSet key ("namespace/name") one step toward a
// pod of its current template on every node that should run one. It
// implements client.Reconciler.
func (d *DaemonSetController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	ds, ok := getAs[*api.DaemonSet](d.dsets, ns, name)
	if !ok {
		d.expect.forget(key)
		logReconcile(d.log, false, key, "gone", "gone", "none")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		// Its revisions and pods may be half gone: no status can be trusted.
		logReconcile(d.log, false, key, "being deleted", "gone", "none (the garbage collector removes its pods and revisions)")
		return nil
	}
	sel, err := ds.Spec.Selector.AsSelector()
	if err != nil || sel.Empty() {
		d.events.Eventf(ctx, ds, api.EventWarning, "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	hist, err := constructHistory(ctx, d.client, ds, sel, d.revs, &ds.Spec.Template, ds.Status.CollisionCount, d.bumpCollision(ds))
	if err != nil {
		return requeueOnConflict(d.log, "daemonset "+key, fmt.Errorf("daemonset %s: revisions: %w", key, err))
	}
	pods, err := claim(ctx, d.client, ds, sel, claimCandidates[*api.Pod](d.pods, ds))
	if err != nil {
		return requeueOnConflict(d.log, "daemonset "+key, fmt.Errorf("daemonset %s: claim pods: %w", key, err))
	}
	s := &dsSync{
		ds:    ds,
		key:   key,
		hash:  hist.cur.Labels[api.LabelControllerRevisionHash],
		pod:   templatePod(ds, ""),
		nodes: listAs[*api.Node](d.nodes.ListBy(nil, "")),
		pods:  podsByNode(pods),
		now:   d.now(),
	}
	slices.SortFunc(s.nodes, func(a, b *api.Node) int { return strings.Compare(a.Name, b.Name) })

	pending := d.expect.pending(key, ns, d.pods, s.now)
	var done []string
	var actErr error
	if pending == 0 {
		done, actErr = d.manage(ctx, s)
		if actErr == nil && len(done) == 0 && ds.Spec.UpdateStrategy.Type != api.OnDelete {
			done, actErr = d.rollingUpdate(ctx, s)
		}
		if actErr == nil {
			live := liveHashes(pods)
			_, actErr = truncateHistory(ctx, d.client, hist.old, replicasOrDefault(ds.Spec.RevisionHistoryLimit, api.DefaultRevisionHistoryLimit), true,
				func(r *api.ControllerRevision) bool { return live[r.Labels[api.LabelControllerRevisionHash]] })
		}
	}
	st := d.status(s)
	statusErr := d.updateStatus(ctx, ds, st, pending == 0)
	d.logLine(s, st, pending, done)
	if err := errors.Join(actErr, statusErr); err != nil {
		return requeueOnConflict(d.log, "daemonset "+key, err)
	}
	if pending > 0 || d.expect.pending(key, ns, d.pods, s.now) > 0 {
		return client.RequeueAfter(expectationsTTL) // the safety net; pod events wake us first
	}
	if s.requeue > 0 {
		return client.RequeueAfter(s.requeue)
	}
	return nil
}

// replicasOrDefault reads an optional count.
func replicasOrDefault(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// liveHashes are the revision hashes the pods carry.
func liveHashes(pods []*api.Pod) map[string]bool {
	live := map[string]bool{}
	for _, p := range pods {
		if h := p.Labels[api.LabelControllerRevisionHash]; h != "" {
			live[h] = true
		}
	}
	return live
}

// manage creates the missing daemon pods and deletes the ones that must
// go (step 4). It returns what it did, one "created pod P on node N" or
// "deleted pod P" per write.
func (d *DaemonSetController) manage(ctx context.Context, s *dsSync) ([]string, error) {
	var create []string   // node names
	var remove []*api.Pod // pods
	surge := allowsSurge(s.ds)
	known := map[string]bool{}
	for _, node := range s.nodes {
		known[node.Name] = true
		shouldRun, shouldContinue, _ := nodeShouldRun(s.pod, node)
		pods, exists := s.pods[node.Name]
		switch {
		case shouldRun && !exists:
			create = append(create, node.Name)
		case shouldContinue:
			running, gone := d.finishedPods(ctx, s, node, pods)
			remove = append(remove, gone...)
			if !surge {
				sortOldestFirst(running)
				if len(running) > 1 {
					remove = append(remove, running[1:]...)
				}
				continue
			}
			c, r := surgeExcess(s, running, shouldRun, node.Name)
			create, remove = append(create, c...), append(remove, r...)
		case !shouldContinue && exists:
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					remove = append(remove, p)
				}
			}
		}
	}
	// Pods made for nodes that no longer exist never get scheduled.
	for node, pods := range s.pods {
		for _, p := range pods {
			if !known[node] && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				remove = append(remove, p)
			}
		}
	}
	return d.syncNodes(ctx, s, create, remove)
}

// finishedPods splits a node's live pods into the running ones and the
// finished ones to delete: a failed pod goes only when the node's backoff
// allows (else the reconcile comes back then), with a FailedDaemonPod
// warning; a succeeded one always.
func (d *DaemonSetController) finishedPods(ctx context.Context, s *dsSync, node *api.Node, pods []*api.Pod) (running, gone []*api.Pod) {
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == api.PodFailed:
			bkey := fmt.Sprintf("%s/%d/%s", s.ds.UID, s.ds.Status.ObservedGeneration, node.Name)
			if wait := d.backoffLeft(bkey, s.now); wait > 0 {
				s.requeueAfter(wait)
				continue
			}
			d.nextBackoff(bkey, s.now)
			d.events.Eventf(ctx, s.ds, api.EventWarning, "FailedDaemonPod", "Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node.Name)
			gone = append(gone, p)
		case p.Status.Phase == api.PodSucceeded:
			d.events.Eventf(ctx, s.ds, api.EventNormal, "SucceededDaemonPod", "Found succeeded daemon pod %s/%s on node %s, will try to delete it", p.Namespace, p.Name, node.Name)
			gone = append(gone, p)
		default:
			running = append(running, p)
		}
	}
	return running, gone
}

// surgeExcess is manage's rule for a node while surge is allowed: keep at
// most the oldest pod of the current revision and the oldest old one;
// drop the old one once it is not ready or the new one is available; a
// node left with no pod gets one.
func surgeExcess(s *dsSync, running []*api.Pod, shouldRun bool, node string) (create []string, remove []*api.Pod) {
	if len(running) <= 1 {
		if len(running) == 0 && shouldRun {
			create = append(create, node)
		}
		return create, nil
	}
	sortOldestFirst(running)
	var oldestNew, oldestOld *api.Pod
	for _, p := range running {
		switch {
		case p.Labels[api.LabelControllerRevisionHash] == s.hash && oldestNew == nil:
			oldestNew = p
		case p.Labels[api.LabelControllerRevisionHash] != s.hash && oldestOld == nil:
			oldestOld = p
		default:
			remove = append(remove, p)
		}
	}
	if oldestNew != nil && oldestOld != nil {
		if !isPodReady(oldestOld) || s.available(oldestNew) {
			remove = append(remove, oldestOld)
		}
	}
	return nil, remove
}

// syncNodes creates a pod on each node of create and deletes each of
// remove, at most daemonSetBurst of each in one reconcile, stopping at the
// first failed create (the next reconcile tries again).
func (d *DaemonSetController) syncNodes(ctx context.Context, s *dsSync, create []string, remove []*api.Pod) ([]string, error) {
	var done []string
	ds := s.ds
	for _, node := range create[:min(len(create), daemonSetBurst)] {
		pod := newDaemonPod(ds, s.hash, node)
		if _, err := d.client.Create(ctx, pod); err != nil {
			d.events.Eventf(ctx, ds, api.EventWarning, "FailedCreate", "Error creating: %v", err)
			return done, fmt.Errorf("daemonset %s: create pod for node %s: %w", s.key, node, err)
		}
		d.expect.expectCreate(s.key, pod.Name, s.now)
		d.events.Eventf(ctx, ds, api.EventNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
		done = append(done, fmt.Sprintf("created pod %s for node %s", pod.Name, node))
	}
	var errs []error
	for _, p := range remove[:min(len(remove), daemonSetBurst)] {
		uid := p.UID
		err := d.client.Delete(ctx, podKind(), p.Namespace, p.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			d.expect.expectDelete(s.key, p.Name, s.now)
			d.events.Eventf(ctx, ds, api.EventNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
			done = append(done, "deleted pod "+p.Name)
		case api.IsNotFound(err) || api.IsConflict(err): // gone, or the name is a new pod's
		default:
			d.events.Eventf(ctx, ds, api.EventWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("daemonset %s: delete pod %s: %w", s.key, p.Name, err))
		}
	}
	return done, errors.Join(errs...)
}

// status counts, node by node, as Kubernetes' updateDaemonSetStatus: the
// oldest pod of a node that should run one decides ready, available and
// up to date.
func (d *DaemonSetController) status(s *dsSync) api.DaemonSetStatus {
	st := api.DaemonSetStatus{
		ObservedGeneration: s.ds.Status.ObservedGeneration,
		CollisionCount:     s.ds.Status.CollisionCount,
		Conditions:         s.ds.Status.Conditions,
	}
	gen := strconv.FormatInt(api.DaemonSetTemplateGeneration(s.ds), 10)
	for _, node := range s.nodes {
		shouldRun, _, _ := nodeShouldRun(s.pod, node)
		pods := s.pods[node.Name]
		if !shouldRun {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		pods = slices.Clone(pods)
		sortOldestFirst(pods)
		p := pods[0]
		if isPodReady(p) {
			st.NumberReady++
			if s.available(p) {
				st.NumberAvailable++
			}
		}
		if p.Labels[api.LabelControllerRevisionHash] == s.hash || p.Labels[api.LabelPodTemplateGeneration] == gen {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}

// available reports whether a ready pod has been ready for
// minReadySeconds; one that will be soon makes the reconcile come back.
func (s *dsSync) available(p *api.Pod) bool {
	if !isPodReady(p) {
		return false
	}
	wait := untilAvailable(p, time.Duration(s.ds.Spec.MinReadySeconds)*time.Second, s.now)
	if wait > 0 {
		s.requeueAfter(wait)
	}
	return wait == 0
}

func (s *dsSync) requeueAfter(d time.Duration) {
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

// updateStatus writes st if it differs; observedGeneration moves only when
// this reconcile acted on the current spec (observe).
func (d *DaemonSetController) updateStatus(ctx context.Context, ds *api.DaemonSet, st api.DaemonSetStatus, observe bool) error {
	if observe {
		st.ObservedGeneration = ds.Generation
	}
	if reflect.DeepEqual(ds.Status, st) {
		return nil
	}
	u := api.Clone(ds)
	u.Status = st
	if _, err := d.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("daemonset %s: update status: %w", api.KeyOf(ds), err)
	}
	return nil
}

// bumpCollision raises status.collisionCount of the stored DaemonSet, so
// the next revision gets another name.
func (d *DaemonSetController) bumpCollision(ds *api.DaemonSet) func(context.Context) error {
	return func(ctx context.Context) error {
		cur, err := client.Get[*api.DaemonSet](ctx, d.client, ds.Namespace, ds.Name)
		if err != nil {
			return err
		}
		n := int32(1)
		if cur.Status.CollisionCount != nil {
			n = *cur.Status.CollisionCount + 1
		}
		cur.Status.CollisionCount = &n
		_, err = d.client.UpdateStatus(ctx, cur)
		return err
	}
}

func (d *DaemonSetController) logLine(s *dsSync, st api.DaemonSetStatus, pending int, done []string) {
	observed := fmt.Sprintf("%s scheduled on %d of %s (%d ready, %d up to date, %d available, %d misscheduled)",
		plural(int(st.CurrentNumberScheduled), "pod"), st.CurrentNumberScheduled, plural(len(s.nodes), "node"),
		st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable, st.NumberMisscheduled)
	desired := fmt.Sprintf("a pod of revision %s on %s", s.hash, plural(int(st.DesiredNumberScheduled), "node"))
	action := "none"
	switch {
	case pending > 0:
		action = fmt.Sprintf("none (waiting for the cache to show %s we created or deleted)", plural(pending, "pod"))
	case len(done) > 0:
		action = strings.Join(done, ", ")
	}
	logReconcile(d.log, len(done) > 0, s.key, observed, desired, action)
}

// Daemon pods.

// templatePod is a pod of ds as the controller makes it, before the node
// affinity: the template's metadata and spec with the daemon tolerations.
func templatePod(ds *api.DaemonSet, node string) *api.Pod {
	t := api.Clone(ds).Spec.Template // never share the cache's maps and slices
	api.AddDaemonTolerations(&t.Spec)
	p := &api.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	p.Namespace = ds.Namespace
	if node != "" {
		p.Spec.NodeName = node
	}
	return p
}

// newDaemonPod is the pod of ds for node: named <ds>-<5 random
// characters>, labelled with the revision hash and template generation,
// owned by ds, and held to node by its required node affinity (matchFields
// metadata.name In [node]) for the scheduler to honour.
func newDaemonPod(ds *api.DaemonSet, hash, node string) *api.Pod {
	p := templatePod(ds, "")
	p.Name = podName(ds.Name)
	p.GenerateName = ""
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[api.LabelControllerRevisionHash] = hash
	if g := api.DaemonSetTemplateGeneration(ds); g > 0 {
		p.Labels[api.LabelPodTemplateGeneration] = strconv.FormatInt(g, 10)
	}
	p.OwnerReferences = []api.OwnerReference{controllerRef(ds)}
	p.Spec.Affinity = pinToNode(p.Spec.Affinity, node)
	api.SetTypeMeta(p)
	return p
}

// pinToNode replaces the required node affinity terms by one that selects
// node by name (Kubernetes' ReplaceDaemonSetPodNodeNameNodeAffinity); the
// preferred terms stay. The template's own required terms were checked
// against the node already (nodeShouldRun).
func pinToNode(a *api.Affinity, node string) *api.Affinity {
	term := api.NodeSelectorTerm{MatchFields: []api.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{node}}}}
	if a == nil {
		a = &api.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &api.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{term}}
	return a
}

// TargetNode is the node a daemon pod is for (api.PodTargetNode).
func TargetNode(p *api.Pod) string { return api.PodTargetNode(p) }

// podsByNode groups pods by TargetNode (pods for no node are left out).
func podsByNode(pods []*api.Pod) map[string][]*api.Pod {
	out := map[string][]*api.Pod{}
	for _, p := range pods {
		if n := TargetNode(p); n != "" {
			out[n] = append(out[n], p)
		}
	}
	return out
}

// sortOldestFirst orders a node's pods as Kubernetes'
// podByCreationTimestampAndPhase: bound before unbound, then oldest first,
// then by name.
func sortOldestFirst(pods []*api.Pod) {
	slices.SortStableFunc(pods, func(a, b *api.Pod) int {
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			if a.Spec.NodeName != "" {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// nodeShouldRun is api.DaemonPodFits for the daemon pod p (templatePod):
// should a pod run on node, may one that runs there stay, and why not.
func nodeShouldRun(p *api.Pod, node *api.Node) (shouldRun, shouldContinue bool, why string) {
	return api.DaemonPodFits(&p.Spec, node)
}

// Failed-pod backoff (Kubernetes' flowcontrol.Backoff, per key).

type podBackoff struct {
	delay time.Duration
	last  time.Time
}

// backoffLeft is how long key must still wait (0: not in backoff).
func (d *DaemonSetController) backoffLeft(key string, now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.failed[key]
	if !ok {
		return 0
	}
	if left := b.last.Add(b.delay).Sub(now); left > 0 {
		return left
	}
	return 0
}

// nextBackoff records a deletion for key: the first waits failedPodBackoff,
// each further one twice as long, up to failedPodBackoffMax; an entry idle
// for twice the maximum starts over.
func (d *DaemonSetController) nextBackoff(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.failed[key]
	switch {
	case !ok || now.Sub(b.last) > 2*failedPodBackoffMax:
		b.delay = failedPodBackoff
	default:
		b.delay = min(2*b.delay, failedPodBackoffMax)
	}
	b.last = now
	d.failed[key] = b
	for k, e := range d.failed { // forget long-idle entries
		if now.Sub(e.last) > 2*failedPodBackoffMax {
			delete(d.failed, k)
		}
	}
}
