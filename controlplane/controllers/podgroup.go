package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The podgroup controller keeps a PodGroup's status in step with its
// pods, as scheduler-plugins' PodGroupReconciler (its phases in its order):
//
//	""                       → Pending
//	Pending, ≥ minMember pods → Scheduling (occupiedBy: the pods' owners)
//	otherwise: count running, succeeded and failed pods, then
//	  fewer pods than minMember          → Pending
//	  running+succeeded < minMember      → Scheduling
//	  running+succeeded ≥ minMember      → Running
//	  failed > 0 and the three ≥ minMember → Failed
//	  succeeded ≥ minMember              → Finished
//
// Finished and Failed are final. Members are the pods of the namespace
// labelled scheduling.x-k8s.io/pod-group: NAME. The scheduler's
// Coscheduling plugin does the placing; this controller only reports.
type PodGroupController struct {
	client client.Interface
	groups Lister // *api.PodGroup
	pods   Lister // *api.Pod
	now    func() time.Time
	log    *slog.Logger
}

const podGroupControllerName = "podgroup-controller"

func podGroupKind() *api.Kind { return api.MustKindOf(&api.PodGroup{}) }

// NewPodGroupController returns the controller over caches of pod groups and pods.
func NewPodGroupController(c client.Interface, groups, pods Lister, log *slog.Logger) *PodGroupController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PodGroupController{client: c, groups: groups, pods: pods, now: time.Now, log: log.With("controller", podGroupControllerName)}
}

// PodHandler enqueues the group of a pod that changed (before and after:
// a pod whose label moved leaves its old group).
func (g *PodGroupController) PodHandler(enqueue func(key string)) client.Handler {
	forPod := func(objs ...api.Object) {
		for _, o := range objs {
			if p, ok := o.(*api.Pod); ok {
				if name := api.PodGroupOf(p); name != "" {
					enqueue(api.Key(p.Namespace, name))
				}
			}
		}
	}
	return client.Handler{
		OnAdd:    func(o api.Object) { forPod(o) },
		OnUpdate: func(o, n api.Object) { forPod(o, n) },
		OnDelete: func(o api.Object) { forPod(o) },
	}
}

// Reconcile implements client.Reconciler.
func (g *PodGroupController) Reconcile(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	obj, ok := g.groups.Get(ns, name)
	if !ok {
		logReconcile(g.log, false, key, "gone", "gone", "none")
		return nil
	}
	pg := obj.(*api.PodGroup)
	if pg.Status.Phase == api.PodGroupFinished || pg.Status.Phase == api.PodGroupFailed {
		logReconcile(g.log, false, key, pg.Status.Phase, pg.Status.Phase, "none")
		return nil
	}
	var pods []*api.Pod
	for _, o := range g.pods.ListBy(labels.SelectorFromSet(labels.Set{api.LabelPodGroup: name}), ns) {
		pods = append(pods, o.(*api.Pod))
	}
	want := PodGroupStatusFor(pg, pods)
	if want == pg.Status {
		logReconcile(g.log, false, key, pg.Status.Phase, want.Phase, "none")
		return nil
	}
	if want.Phase != pg.Status.Phase && want.ScheduleStartTime.IsZero() && want.Phase == api.PodGroupScheduling {
		want.ScheduleStartTime = api.NewTime(g.now().Truncate(time.Second))
	}
	upd := api.Clone(pg)
	upd.Status = want
	if _, err := g.client.UpdateStatus(ctx, upd); err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update podgroup %s status: %w", key, err)
	}
	logReconcile(g.log, true, key, pg.Status.Phase, want.Phase,
		fmt.Sprintf("status: running %d, succeeded %d, failed %d", want.Running, want.Succeeded, want.Failed))
	return nil
}

// PodGroupStatusFor is the status the controller writes for pg with these
// member pods (the reconciler's switch, one step at a time as upstream:
// a new group first becomes Pending, then moves on at the next change).
func PodGroupStatusFor(pg *api.PodGroup, pods []*api.Pod) api.PodGroupStatus {
	st := pg.Status
	min := pg.Spec.MinMember
	switch st.Phase {
	case "":
		st.Phase = api.PodGroupPending
	case api.PodGroupPending:
		if len(pods) >= int(min) {
			st.Phase = api.PodGroupScheduling
			if len(pods) > 0 {
				st.OccupiedBy = occupiedBy(pods[0])
			}
		}
	default:
		st.Running, st.Succeeded, st.Failed = 0, 0, 0
		for _, p := range pods {
			switch p.Status.Phase {
			case api.PodRunning:
				st.Running++
			case api.PodSucceeded:
				st.Succeeded++
			case api.PodFailed:
				st.Failed++
			}
		}
		if len(pods) < int(min) {
			st.Phase = api.PodGroupPending
			break
		}
		if st.Succeeded+st.Running < min {
			st.Phase = api.PodGroupScheduling
		}
		if st.Succeeded+st.Running >= min {
			st.Phase = api.PodGroupRunning
		}
		if st.Failed != 0 && st.Failed+st.Running+st.Succeeded >= min {
			st.Phase = api.PodGroupFailed
		}
		if st.Succeeded >= min {
			st.Phase = api.PodGroupFinished
		}
	}
	return st
}

// occupiedBy is upstream's fillOccupiedObj: NS/OWNER of each owner, sorted.
func occupiedBy(pod *api.Pod) string {
	var refs []string
	for _, o := range pod.OwnerReferences {
		refs = append(refs, pod.Namespace+"/"+o.Name)
	}
	slices.Sort(refs)
	return strings.Join(refs, ",")
}
