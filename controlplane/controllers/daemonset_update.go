package controllers

import (
	"context"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
)

// A DaemonSet's rolling update, as Kubernetes' (pkg/controller/daemon/update.go).
// It runs only once manage has nothing left to create or delete, and it
// never creates a pod on a node that has none: manage does that.
//
// Without surge (maxSurge 0, the default): count the nodes whose pod is
// unavailable (a node with no pod, a node being replaced, a new pod not
// yet available). Old pods that are not available are deleted at once
// (they serve nothing); old available pods are deleted while fewer than
// maxUnavailable nodes are unavailable. manage then makes the new pod on
// each emptied node once the old one is gone.
//
// With surge (maxSurge > 0, maxUnavailable 0): on up to maxSurge nodes at
// a time the new pod is started next to the old one (on a node whose old
// pod is unavailable, at once); an old pod is deleted once its node's new
// pod is available. So no node is ever without an available daemon pod.

// allowsSurge: RollingUpdate with a maxSurge above zero.
func allowsSurge(ds *api.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}

// surgeCount and unavailableCount scale maxSurge and maxUnavailable to
// the desired number of nodes, rounding up (Kubernetes' SurgeCount and
// UnavailableCount); both are 0 for OnDelete.
func surgeCount(ds *api.DaemonSet, desired int) (int, error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type == api.OnDelete || ru == nil || ru.MaxSurge == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
}

func unavailableCount(ds *api.DaemonSet, desired int) (int, error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type == api.OnDelete || ru == nil || ru.MaxUnavailable == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
}

// isUpdated: the pod was made from the current revision (hash), or
// carries the current template generation.
func (s *dsSync) isUpdated(p *api.Pod) bool {
	if p.Labels[api.LabelControllerRevisionHash] == s.hash {
		return true
	}
	g := api.DaemonSetTemplateGeneration(s.ds)
	return g > 0 && p.Labels[api.LabelPodTemplateGeneration] == strconv.FormatInt(g, 10)
}

// updatedAndOld returns a node's live new and old pod; ok is false when
// the node has more than one of either (manage prunes those first).
func (s *dsSync) updatedAndOld(pods []*api.Pod) (newPod, oldPod *api.Pod, ok bool) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if s.isUpdated(p) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// rollingUpdate replaces old pods (step 5); it returns what it did.
func (d *DaemonSetController) rollingUpdate(ctx context.Context, s *dsSync) ([]string, error) {
	desired := 0
	nodes := map[string]*api.Node{}
	for _, n := range s.nodes {
		nodes[n.Name] = n
		if run, _, _ := nodeShouldRun(s.pod, n); run {
			desired++
		}
	}
	maxSurge, err := surgeCount(s.ds, desired)
	if err != nil {
		return nil, err
	}
	maxUnavailable, err := unavailableCount(s.ds, desired)
	if err != nil {
		return nil, err
	}
	if desired > 0 && maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1 // an impossible configuration: Kubernetes' fallback
	}
	// Nodes that should run a pod and have none count as unavailable.
	byNode := map[string][]*api.Pod{}
	for _, n := range s.nodes {
		if run, _, _ := nodeShouldRun(s.pod, n); run {
			byNode[n.Name] = nil
		}
	}
	for n, pods := range s.pods {
		byNode[n] = pods
	}
	names := sortedNodeNames(byNode)
	if maxSurge == 0 {
		return d.syncNodes(ctx, s, nil, s.replaceWithin(names, byNode, maxUnavailable))
	}
	create, remove := s.surgeWithin(names, byNode, nodes, maxSurge, desired)
	return d.syncNodes(ctx, s, create, remove)
}

func sortedNodeNames(m map[string][]*api.Pod) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// replaceWithin picks the old pods to delete without surge.
func (s *dsSync) replaceWithin(names []string, byNode map[string][]*api.Pod, maxUnavailable int) []*api.Pod {
	unavailable := 0
	var replace, candidates []*api.Pod
	for _, node := range names {
		newPod, oldPod, ok := s.updatedAndOld(byNode[node])
		switch {
		case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++ // manage creates or prunes here first
		case newPod != nil:
			if !s.available(newPod) {
				unavailable++
			}
		case !s.available(oldPod):
			replace = append(replace, oldPod) // serves nothing: replace at once
			unavailable++
		case unavailable < maxUnavailable:
			candidates = append(candidates, oldPod)
		}
	}
	room := max(0, maxUnavailable-unavailable)
	return append(replace, candidates[:min(room, len(candidates))]...)
}

// surgeWithin picks the nodes to start a new pod on and the old pods to
// delete with surge.
func (s *dsSync) surgeWithin(names []string, byNode map[string][]*api.Pod, nodes map[string]*api.Node, maxSurge, desired int) ([]string, []*api.Pod) {
	var remove, stranded []*api.Pod // stranded: old pods on nodes that should no longer run one
	var allowed, candidates []string
	surging, availableNodes := 0, 0
	for _, node := range names {
		newPod, oldPod, ok := s.updatedAndOld(byNode[node])
		if !ok {
			surging++
			continue
		}
		if (oldPod != nil && s.available(oldPod)) || (oldPod == nil && newPod != nil && s.available(newPod)) {
			availableNodes++
		}
		shouldRun := false
		if n := nodes[node]; n != nil {
			shouldRun, _, _ = nodeShouldRun(s.pod, n)
		}
		switch {
		case oldPod == nil:
			// manage looks after this node
		case newPod == nil && !s.available(oldPod):
			if !shouldRun {
				remove = append(remove, oldPod)
				continue
			}
			allowed = append(allowed, node)
		case newPod == nil:
			if !shouldRun {
				stranded = append(stranded, oldPod)
				continue
			}
			if surging < maxSurge {
				candidates = append(candidates, node)
			}
		case !s.available(newPod):
			surging++ // waiting for the new pod
		default:
			remove = append(remove, oldPod) // the new one is available
		}
	}
	// Old pods on nodes that left the set go only while enough others are
	// available: surge promises no gap.
	if spare := availableNodes - desired; spare > 0 {
		remove = append(remove, stranded[:min(spare, len(stranded))]...)
	}
	room := max(0, maxSurge-surging)
	return append(allowed, candidates[:min(room, len(candidates))]...), remove
}
