package kueue

import (
	"cmp"
	"fmt"
	"slices"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// # Topology-aware scheduling
//
// A pod set that asks for one domain of a topology level (the pod
// template's kueue.x-k8s.io/podset-required-topology or
// podset-preferred-topology annotation, a node label listed in the
// flavor's Topology) is admitted only into a domain where its pods fit:
// the nodes of the flavor (its nodeLabels) that share one value of that
// label, each node's allocatable minus the requests of the pods bound to it
// and of admitted, not yet placed pods pinned to its domain, packed pod by
// pod. Of the domains that fit, the fullest is taken (Kueue's BestFit, so
// big domains stay free for big jobs). The assignment is written as Kueue's
// topologyAssignment (one slice, one domain) and the Job's pod template
// gets nodeSelector LEVEL: VALUE when it is unsuspended.
//
// How this differs from Kueue: Kueue assigns every pod to a node (the
// lowest level) and gates the pods until it has injected each pod's node
// selector (kueue.x-k8s.io/topology scheduling gate); skiff pins the whole
// pod set to the domain and lets the scheduler place the pods within it.
// A preferred request that fits no single domain is admitted unpinned
// (Kueue would spread it over the fewest domains).

// placeTopology places wl's pod sets that ask for a topology (changing a's
// assignments) and returns Kueue-worded reasons when one does not fit.
func (s *snapshot) placeTopology(c *cqState, wl *api.Workload, a *assignment) string {
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		tr := ps.TopologyRequest
		if tr == nil || (tr.Required == nil && tr.Preferred == nil) {
			continue
		}
		level, required := "", tr.Required != nil
		if required {
			level = *tr.Required
		} else {
			level = *tr.Preferred
		}
		psa := &a.podSets[i]
		var flavor *api.ResourceFlavor
		for _, f := range psa.Flavors {
			flavor = s.flavors[f]
			break
		}
		if flavor == nil || flavor.Spec.TopologyName == nil {
			return fmt.Sprintf("couldn't assign flavors to pod set %s: flavor %s does not support TopologyAwareScheduling", ps.Name, flavorName(flavor))
		}
		topo := s.topologies[*flavor.Spec.TopologyName]
		if topo == nil || !slices.ContainsFunc(topo.Spec.Levels, func(l api.TopologyLevel) bool { return l.NodeLabel == level }) {
			return fmt.Sprintf("couldn't assign flavors to pod set %s: flavor %s does not contain the requested level", ps.Name, flavor.Name)
		}
		value, fit := s.bestDomain(flavor, level, ps)
		if value == "" {
			if !required {
				continue
			}
			return fmt.Sprintf("couldn't assign flavors to pod set %s: topology %q allows to fit only %d out of %d pod(s)", ps.Name, topo.Name, fit, ps.Count)
		}
		v, n := value, ps.Count
		psa.TopologyAssignment = &api.TopologyAssignment{Levels: []string{level},
			Slices: []api.TopologyAssignmentSlice{{DomainCount: 1, ValuesPerLevel: []api.TopologyAssignmentSliceLevelValues{{Universal: &v}},
				PodCounts: api.TopologyAssignmentSlicePodCounts{Universal: &n}}}}
	}
	return ""
}

func flavorName(f *api.ResourceFlavor) string {
	if f == nil {
		return ""
	}
	return f.Name
}

// bestDomain returns the fullest domain of level where ps's pods fit, or
// "" and the most pods any domain fits.
func (s *snapshot) bestDomain(rf *api.ResourceFlavor, level string, ps *api.PodSet) (string, int32) {
	nodes, pods := s.loadNodes()
	perPod, _ := framework.PodRequests(&api.Pod{Spec: ps.Template.Spec})
	free := map[string]framework.Resource{}
	domainOf := map[string]string{}
	for _, n := range nodes {
		v, ok := n.Labels[level]
		if !ok || !matchesLabels(n.Labels, rf.Spec.NodeLabels) || n.Spec.Unschedulable {
			continue
		}
		domainOf[n.Name] = v
		free[n.Name] = framework.NewResource(n.Status.Allocatable)
	}
	for _, p := range pods {
		if r, ok := free[p.Spec.NodeName]; ok && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
			req, _ := framework.PodRequests(p)
			r.Sub(req)
			free[p.Spec.NodeName] = r
		}
	}
	fitIn := map[string]int32{}
	room := map[string]int64{}
	for name, r := range free {
		d := domainOf[name]
		k := podsThatFit(r, perPod)
		fitIn[d] += int32(min(k, int64(ps.Count)))
		room[d] += k
	}
	// Admitted workloads pinned to a domain whose pods are not bound yet
	// hold room there too.
	for _, w := range s.workloads {
		if !holdsQuota(w) {
			continue
		}
		for _, psa := range w.Status.Admission.PodSetAssignments {
			if ta := psa.TopologyAssignment; ta != nil && len(ta.Levels) == 1 && ta.Levels[0] == level && len(ta.Slices) == 1 &&
				len(ta.Slices[0].ValuesPerLevel) == 1 && ta.Slices[0].ValuesPerLevel[0].Universal != nil {
				d := *ta.Slices[0].ValuesPerLevel[0].Universal
				bound := int32(0)
				for _, p := range pods {
					if p.Namespace == w.Namespace && p.Spec.NodeName != "" && ownedByWorkloadJob(p, w) {
						bound++
					}
				}
				if cnt := ptrOr(psa.Count, 0) - bound; cnt > 0 {
					fitIn[d] = max(0, fitIn[d]-cnt)
					room[d] -= int64(cnt)
				}
			}
		}
	}
	var domains []string
	best := int32(0)
	for d, n := range fitIn {
		best = max(best, n)
		if n >= ps.Count {
			domains = append(domains, d)
		}
	}
	if len(domains) == 0 {
		return "", best
	}
	slices.SortFunc(domains, func(a, b string) int { return cmp.Or(cmp.Compare(room[a], room[b]), cmp.Compare(a, b)) })
	return domains[0], ps.Count
}

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

func ownedByWorkloadJob(p *api.Pod, w *api.Workload) bool {
	for _, ref := range w.OwnerReferences {
		if ref.Kind == "Job" && p.Labels[api.JobNameLabel] == ref.Name {
			return true
		}
	}
	return false
}

// podsThatFit: how many pods of perPod fit into r.
func podsThatFit(r, perPod framework.Resource) int64 {
	k := int64(1 << 30)
	check := func(have, want int64) {
		if want > 0 {
			k = min(k, max(0, have/want))
		}
	}
	check(r.MilliCPU, perPod.MilliCPU)
	check(r.Memory, perPod.Memory)
	for name, v := range perPod.Scalar {
		check(r.Get(name), v)
	}
	return k
}

func matchesLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
