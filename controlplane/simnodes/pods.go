package simnodes

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

var podKind = api.MustKindOf(&api.Pod{})

// startPods runs the pod informer and loop under s.wg.
func (s *Sim) startPods(ctx context.Context) {
	inf := client.NewInformer(s.c, podKind, "", api.ListOptions{}, s.log)
	opts := client.DefaultLoopOptions("simnodes-pods")
	opts.Workers, opts.Log = s.cfg.Workers, s.log
	loop := client.NewLoop(client.ReconcilerFunc(func(ctx context.Context, key string) error {
		return s.reconcilePod(ctx, inf, key)
	}), opts)
	loop.SetResyncFunc(inf.Keys)
	enqueue := func(obj api.Object) {
		if p := obj.(*api.Pod); s.owns(p) {
			loop.Enqueue(client.KeyFunc(p))
		}
	}
	inf.AddHandler(client.Handler{OnAdd: enqueue, OnUpdate: func(_, obj api.Object) { enqueue(obj) }})
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		inf.Run(ctx)
	}()
	go func() {
		defer s.wg.Done()
		_ = loop.Run(ctx)
	}()
}

// owns: the pod is bound to one of this Sim's nodes.
func (s *Sim) owns(p *api.Pod) bool {
	_, ok := s.index[p.Spec.NodeName]
	return ok
}

// reconcilePod brings one pod to what its simulated node would make of
// it: deleted when it is being deleted, Running otherwise.
func (s *Sim) reconcilePod(ctx context.Context, inf *client.Informer, key string) error {
	ns, name := client.SplitKey(key)
	obj, ok := inf.Get(ns, name)
	if !ok {
		return nil
	}
	p := obj.(*api.Pod)
	if !s.owns(p) || s.Failed(p.Spec.NodeName) {
		return nil // a failed node runs and stops nothing
	}
	if p.DeletionTimestamp != nil {
		zero := int64(0)
		uid := p.UID
		err := s.c.Delete(ctx, podKind, ns, name, api.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &api.Preconditions{UID: &uid}})
		if err != nil && !api.IsNotFound(err) {
			return fmt.Errorf("delete pod %s: %w", key, err)
		}
		return nil
	}
	if p.Status.Phase != "" && p.Status.Phase != api.PodPending {
		return nil // running, or finished: nothing left to simulate
	}
	next := api.Clone(p)
	s.running(next)
	if _, err := client.UpdateStatus(ctx, s.c, next); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("update status of pod %s: %w", key, err)
	}
	return nil
}

// running writes the status of a pod whose containers all started.
func (s *Sim) running(p *api.Pod) {
	now := api.Now()
	st := &p.Status
	st.Phase = api.PodRunning
	st.HostIP = s.hostIP(p.Spec.NodeName)
	if st.PodIP == "" {
		st.PodIP = s.nextPodIP(p.Spec.NodeName)
	}
	st.PodIPs = []api.PodIP{{IP: st.PodIP}}
	st.StartTime = &now
	st.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, api.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image,
			Ready: true, ContainerID: "sim://" + p.Name + "-" + c.Name,
			State: api.ContainerState{Terminated: &api.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}})
	}
	st.ContainerStatuses = nil
	started := true
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, api.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image,
			Ready: true, Started: &started, ContainerID: "sim://" + p.Name + "-" + c.Name,
			State: api.ContainerState{Running: &api.ContainerStateRunning{StartedAt: now}}})
	}
	for _, t := range []string{api.PodInitialized, api.ContainersReady, api.PodReady} {
		setCondition(st, api.PodCondition{Type: t, Status: api.ConditionTrue, LastTransitionTime: now})
	}
}

func setCondition(st *api.PodStatus, c api.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// Fail makes a node fail as a crashed machine does: it posts no more
// heartbeats and runs or stops none of its pods. The node lifecycle
// controller notices (from its heartbeats, or at once from a gossip view
// that reports the member dead) and evicts its pods. There is no way
// back: a failed node stays failed.
func (s *Sim) Fail(name string) error {
	if _, ok := s.index[name]; !ok {
		return fmt.Errorf("node %q is not one of the simulated nodes", name)
	}
	s.failedMu.Lock()
	defer s.failedMu.Unlock()
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	s.failed[name] = true
	return nil
}

// Failed reports whether Fail stopped the node.
func (s *Sim) Failed(name string) bool {
	s.failedMu.Lock()
	defer s.failedMu.Unlock()
	return s.failed[name]
}

// Complete ends a Running pod of one of the nodes as its containers
// exiting 0 would: phase Succeeded, each container terminated
// (Completed), Ready false (PodCompleted). A simulated pod runs until
// told: a scenario's clock decides when its work is done.
func (s *Sim) Complete(ctx context.Context, namespace, name string) error {
	p, err := client.Get[*api.Pod](ctx, s.c, namespace, name)
	if err != nil {
		return err
	}
	if !s.owns(p) || s.Failed(p.Spec.NodeName) {
		return fmt.Errorf("pod %s/%s is not running on a simulated node", namespace, name)
	}
	if p.Status.Phase != api.PodRunning {
		return fmt.Errorf("pod %s/%s is %s, not Running", namespace, name, p.Status.Phase)
	}
	next := api.Clone(p)
	now := api.Now()
	st := &next.Status
	st.Phase = api.PodSucceeded
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.State = api.ContainerState{Terminated: &api.ContainerStateTerminated{Reason: "Completed", StartedAt: started, FinishedAt: now,
			ContainerID: cs.ContainerID}}
		cs.Ready = false
		f := false
		cs.Started = &f
	}
	for _, t := range []string{api.ContainersReady, api.PodReady} {
		setCondition(st, api.PodCondition{Type: t, Status: api.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now})
	}
	if _, err := client.UpdateStatus(ctx, s.c, next); err != nil {
		return fmt.Errorf("complete pod %s/%s: %w", namespace, name, err)
	}
	return nil
}
