package scheduler

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Run schedules pods until ctx ends. It starts and owns every goroutine it
// needs and returns only after they have stopped:
//
//   - two informers (all nodes, all pods) whose handlers feed the cache and
//     the queue; handlers only record and enqueue, they never schedule;
//   - the scheduling loop: pop a pod, run one cycle, hand the binding (or
//     the failure report) to a worker; one cycle at a time, so each cycle
//     sees the pods assumed by the ones before;
//   - BindWorkers workers that bind and report, so a slow API call never
//     holds up the next decision;
//   - a one-second ticker that flushes the queue's backoff (Pop itself
//     wakes when a backoff ends; this is a safety net) and
//     unschedulable parts, expires assumed pods never confirmed, and
//     reports the pods the PreEnqueue gate holds (gated.go);
//   - the event recorder, when Options.Recorder was nil.
//
// Run may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The informers are the process's shared ones (Options.Informers) or
	// the scheduler's own; either way its handlers leave them when it
	// stops (a reloaded configuration's scheduler adds its own, and is
	// first told every cached object).
	nodes, pods, groups := s.informers.InformerFor(&api.Node{}), s.informers.InformerFor(&api.Pod{}), s.informers.InformerFor(&api.PodGroup{})
	regs := []struct {
		inf *client.Informer
		reg client.Registration
	}{
		{nodes, nodes.AddHandler(client.Handler{OnAdd: s.onNodeAdd, OnUpdate: s.onNodeUpdate, OnDelete: s.onNodeDelete})},
		{pods, pods.AddHandler(client.Handler{OnAdd: s.onPodAdd, OnUpdate: s.onPodUpdate, OnDelete: s.onPodDelete})},
		{groups, groups.AddHandler(client.Handler{OnAdd: s.onPodGroupAdd, OnUpdate: func(_, o api.Object) { s.onPodGroupAdd(o) }, OnDelete: s.onPodGroupDelete})},
	}
	defer func() {
		for _, r := range regs {
			r.inf.RemoveHandler(r.reg)
		}
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	if s.ownsInfs {
		defer s.informers.Wait()
	}
	defer cancel()                 // runs before the waits
	s.informers.Start(ctx)         // a no-op when the controllers started the shared factory
	for _, es := range s.sources { // DynamicResources: claims, classes, slices
		if em, ok := es.(framework.EventEmitter); ok {
			em.SetEventSink(func(ev framework.ClusterEvent, oldObj, newObj any) { s.queue.Move(ev, oldObj, newObj) })
		}
		wg.Go(func() { es.Run(ctx, func() { s.queue.Move(wildCard, nil, nil) }) })
	}
	if s.ownRec != nil {
		wg.Go(func() { _ = s.ownRec.Run(ctx) })
	}
	if !nodes.WaitForSync(ctx) || !pods.WaitForSync(ctx) || !groups.WaitForSync(ctx) {
		return nil // ctx ended first
	}
	for _, es := range s.sources {
		if !es.WaitForSync(ctx) {
			return nil
		}
	}
	s.log.Info("scheduler started", "nodes", len(nodes.List()), "pods", len(pods.List()))

	tasks := make(chan *task, s.workers)
	var workers sync.WaitGroup
	for range s.workers {
		workers.Go(func() {
			for t := range tasks {
				s.runTask(ctx, t)
			}
		})
	}
	var reporting atomic.Bool
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.queue.Flush()
				if reporting.CompareAndSwap(false, true) { // gated.go; one report at a time
					wg.Go(func() { defer reporting.Store(false); s.reportGated(ctx) })
				}
				for _, p := range s.cache.Cleanup(s.now()) {
					s.log.Warn("assumed pod expired: its binding was never confirmed", "pod", p.Key)
					s.podGone(p.Pod)
				}
			}
		}
	})
	for {
		qp, err := s.queue.Pop(ctx)
		if err != nil {
			break
		}
		if t := s.scheduleOne(ctx, qp); t != nil {
			if t.waits {
				// Held at Permit: its own goroutine, so waiting pods never
				// take all the workers (permitwait.go).
				workers.Go(func() { s.runTask(ctx, t) })
				continue
			}
			tasks <- t
		}
	}
	close(tasks)
	workers.Wait()
	return nil
}

// responsible reports whether this scheduler should place a pending pod:
// one of its profiles is the pod's schedulerName. A pod naming no
// profile is left alone, Pending with no event, as Kubernetes does.
func (s *Scheduler) responsible(pod *api.Pod) bool {
	return s.profileOf(pod) != nil && pod.DeletionTimestamp == nil && !isTerminal(pod)
}

func (s *Scheduler) onNodeAdd(obj api.Object) {
	node := obj.(*api.Node)
	s.cache.AddNode(node)
	s.queue.Move(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, node)
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj api.Object) {
	old, node := oldObj.(*api.Node), newObj.(*api.Node)
	s.cache.AddNode(node)
	if a := nodeChange(old, node); a != 0 {
		s.queue.Move(framework.ClusterEvent{Resource: framework.Node, ActionType: a}, old, node)
	}
}

func (s *Scheduler) onNodeDelete(obj api.Object) {
	node := obj.(*api.Node)
	s.cache.RemoveNode(node.Name)
	s.queue.Move(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Delete}, node, nil)
}

// nodeChange says what a node update changed that a plugin reads (0:
// nothing, a heartbeat).
func nodeChange(old, node *api.Node) framework.ActionType {
	var a framework.ActionType
	if old.Spec.Unschedulable != node.Spec.Unschedulable || !reflect.DeepEqual(old.Spec.Taints, node.Spec.Taints) {
		a |= framework.UpdateNodeTaint
	}
	if !maps.Equal(old.Labels, node.Labels) {
		a |= framework.UpdateNodeLabel
	}
	if !sameResources(old.Status.Allocatable, node.Status.Allocatable) || !sameResources(old.Status.Capacity, node.Status.Capacity) {
		a |= framework.UpdateNodeAllocatable
	}
	if readyStatus(old) != readyStatus(node) {
		a |= framework.UpdateNodeCondition
	}
	if !maps.Equal(old.Annotations, node.Annotations) {
		a |= framework.UpdateNodeAnnotation
	}
	return a
}

// nodeSchedulingChanged reports whether a node update can change a
// scheduling decision; heartbeats alone do not.
func nodeSchedulingChanged(old, node *api.Node) bool {
	return nodeChange(old, node)&^framework.UpdateNodeAnnotation != 0
}

// sameResources compares quantities by value (reflect.DeepEqual would see
// "1" and "1000m" as different).
func sameResources(a, b api.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

func readyStatus(n *api.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			return c.Status
		}
	}
	return ""
}

func (s *Scheduler) onPodAdd(obj api.Object) {
	pod := obj.(*api.Pod)
	s.queue.Activate(s.groups.setPod(pod)) // a new sibling may complete a gang
	switch {
	case pod.Spec.NodeName != "":
		s.cache.AddPod(pod)
		if !isTerminal(pod) {
			s.queue.Move(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}, nil, pod)
		}
	case s.responsible(pod):
		s.queue.Add(pod)
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj api.Object) {
	old, pod := oldObj.(*api.Pod), newObj.(*api.Pod)
	s.queue.Activate(s.groups.setPod(pod))
	if pod.Spec.NodeName != "" {
		if old.Spec.NodeName == "" {
			s.queue.Delete(pod) // bound: it leaves the queue
		}
		s.cache.AddPod(pod) // confirms an assumed pod; drops a finished one
		switch {
		case isTerminal(pod) && !isTerminal(old):
			s.podGone(old) // its resources are free
		case old.Spec.NodeName == "":
			s.queue.Move(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}, nil, pod)
		case !maps.Equal(old.Labels, pod.Labels):
			s.queue.Move(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodLabel}, old, pod)
		}
		return
	}
	if s.responsible(pod) {
		s.queue.Update(old, pod)
	} else {
		s.queue.Delete(pod)
	}
}

// podGone tells the queue a pod left its node (deleted, finished, its
// binding failed or expired): its room, ports and labels are gone.
func (s *Scheduler) podGone(pod *api.Pod) {
	s.queue.Move(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, pod, nil)
}

// wildCard moves every waiting pod: an event source that cannot say what
// changed.
var wildCard = framework.ClusterEvent{Resource: framework.WildCard, ActionType: framework.All}

// onPodGroupAdd records a PodGroup (added or changed) and has its pending
// members tried again: a lower minMember may complete the gang now.
func (s *Scheduler) onPodGroupAdd(obj api.Object) {
	s.queue.Activate(s.groups.setGroup(obj.(*api.PodGroup)))
}

func (s *Scheduler) onPodGroupDelete(obj api.Object) {
	s.groups.deleteGroup(obj.(*api.PodGroup))
}

func (s *Scheduler) onPodDelete(obj api.Object) {
	pod := obj.(*api.Pod)
	s.queue.Delete(pod)
	s.groups.deletePod(pod)
	s.waiting.Reject(string(pod.UID), "", "pod deleted while waiting on permit")
	key := api.Key(pod.Namespace, pod.Name)
	if pod.Spec.NodeName != "" || s.cache.IsAssumed(key) {
		s.cache.RemovePod(pod)
		s.podGone(pod)
	}
}
