package kueue

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// Quota, as Kueue's cache (pkg/cache/scheduler, resource_node.go) counts it,
// for a ClusterQueue c and one flavor-resource fr, with nominal quota N,
// borrowing limit B (nil: none) and lending limit L (nil: all of N):
//
//	guaranteed(c)  = N - L            (0 without a lending limit)
//	lendable(c)    = N - guaranteed(c)
//	pool           = Σ lendable(m)    over the cohort's members m
//	poolUsage      = Σ max(0, usage(m) - guaranteed(m))
//	available(c)   = max(0, guaranteed(c) - usage(c)) + min(pool - poolUsage, N + B - usage(c))
//	potential(c)   = guaranteed(c) + min(pool, N + B - guaranteed(c))
//
// Without a cohort the pool is c's own lendable quota, so available is
// N - usage and potential is N. A workload fits when its request is at most
// available; it can never fit (ExceedsMaxQuota) when it is more than
// potential.

// fr is a flavor-resource pair.
type fr struct{ flavor, resource string }

// amounts are per flavor-resource, in api.ResourceAmount units.
type amounts map[fr]int64

func (a amounts) add(b amounts, sign int64) {
	for k, v := range b {
		a[k] = api.AddAmounts(a[k], sign*v)
	}
}

// cqState is one ClusterQueue in a snapshot.
type cqState struct {
	cq    *api.ClusterQueue
	usage amounts
	// admitted: workloads holding quota here.
	admitted []*api.Workload
}

func (c *cqState) quota(f fr) (nominal int64, borrowing, lending *int64, ok bool) {
	for _, rg := range c.cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			if fq.Name != f.flavor {
				continue
			}
			for _, rq := range fq.Resources {
				if rq.Name != f.resource {
					continue
				}
				n, _ := api.ResourceAmount(rq.Name, rq.NominalQuota)
				if rq.BorrowingLimit != nil {
					b, _ := api.ResourceAmount(rq.Name, *rq.BorrowingLimit)
					borrowing = &b
				}
				if rq.LendingLimit != nil {
					l, _ := api.ResourceAmount(rq.Name, *rq.LendingLimit)
					lending = &l
				}
				return n, borrowing, lending, true
			}
		}
	}
	return 0, nil, nil, false
}

func (c *cqState) guaranteed(f fr) int64 {
	n, _, l, _ := c.quota(f)
	if l == nil {
		return 0
	}
	return max(0, n-*l)
}

// members of c's cohort (c alone without one).
func (s *snapshot) members(c *cqState) []*cqState {
	if c.cq.Spec.CohortName == "" {
		return []*cqState{c}
	}
	var out []*cqState
	for _, name := range s.cqNames {
		if m := s.cqs[name]; m.cq.Spec.CohortName == c.cq.Spec.CohortName {
			out = append(out, m)
		}
	}
	return out
}

func (s *snapshot) pool(c *cqState, f fr) (pool, poolUsage int64) {
	for _, m := range s.members(c) {
		n, _, _, ok := m.quota(f)
		g := m.guaranteed(f)
		if ok {
			pool += n - g
		}
		poolUsage += max(0, m.usage[f]-g)
	}
	return pool, poolUsage
}

func ceiling(c *cqState, f fr) int64 {
	n, b, _, _ := c.quota(f)
	if c.cq.Spec.CohortName == "" {
		return n
	}
	if b == nil {
		return math.MaxInt64
	}
	return api.AddAmounts(n, *b)
}

func (s *snapshot) available(c *cqState, f fr) int64 {
	g := c.guaranteed(f)
	pool, used := s.pool(c, f)
	return max(0, g-c.usage[f]) + max(0, min(pool-used, api.SubAmounts(ceiling(c, f), c.usage[f])))
}

func (s *snapshot) potential(c *cqState, f fr) int64 {
	g := c.guaranteed(f)
	pool, _ := s.pool(c, f)
	return g + min(pool, api.SubAmounts(ceiling(c, f), g))
}

// podSetRequests is what one pod set charges: a pod's requests (the
// scheduler's PodRequests: containers summed, init containers' max)
// times count.
func podSetRequests(ps *api.PodSet) map[string]int64 {
	req, _ := framework.PodRequests(&api.Pod{Spec: ps.Template.Spec})
	out := map[string]int64{}
	set := func(name string, v int64) {
		if v != 0 {
			out[name] = v * int64(ps.Count)
		}
	}
	set(api.ResourceCPU, req.MilliCPU)
	set(api.ResourceMemory, req.Memory)
	for name, v := range req.Scalar {
		set(name, v)
	}
	return out
}

// assignment is the outcome of assigning flavors to a workload.
type assignment struct {
	podSets []api.PodSetAssignment
	usage   amounts
	// reasons, per pod set, why it does not fit (empty: fits).
	message string
	// short lists the flavor-resources that ran short, with how much more
	// was needed (for preemption and explanations).
	short map[fr]int64
	// over lists the flavor-resources whose request exceeds the most the
	// ClusterQueue can ever have, with that maximum (explanations).
	over map[fr]int64
	// never: the workload cannot fit even in an empty queue.
	never bool
}

func (a *assignment) fits() bool { return a.message == "" }

// assign tries the flavors of each resource group in order for every pod
// set of wl, as Kueue's FlavorAssigner: the first flavor whose taints the
// pods tolerate, whose node labels agree with the pods' nodeSelector and
// whose quota has room for every requested resource of the group.
func (s *snapshot) assign(c *cqState, wl *api.Workload) *assignment {
	a := &assignment{usage: amounts{}, short: map[fr]int64{}, over: map[fr]int64{}}
	var msgs []string
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		req := podSetRequests(ps)
		psa := api.PodSetAssignment{Name: ps.Name, Flavors: map[string]string{}, ResourceUsage: api.ResourceList{}, Count: &ps.Count}
		var status string
		for _, res := range slices.Sorted(maps.Keys(req)) {
			if psa.Flavors[res] != "" {
				continue // assigned with its group
			}
			rg := resourceGroupOf(c.cq, res)
			if rg == nil {
				status = fmt.Sprintf("resource %s unavailable in ClusterQueue", res)
				break
			}
			flavor, reasons := s.assignGroup(c, ps, rg, req, a)
			if flavor == "" {
				slices.Sort(reasons)
				status = strings.Join(reasons, ", ")
				break
			}
			for _, r := range rg.CoveredResources {
				if v, ok := req[r]; ok {
					psa.Flavors[r] = flavor
					psa.ResourceUsage[r] = api.AmountQuantity(r, v, quantityFormat(ps, r))
					a.usage[fr{flavor, r}] += v
				}
			}
		}
		if status != "" {
			msgs = append(msgs, "couldn't assign flavors to pod set "+ps.Name+": "+status)
			continue
		}
		a.podSets = append(a.podSets, psa)
	}
	a.message = strings.Join(msgs, "; ")
	return a
}

// quantityFormat keeps the format the pod template wrote the resource in
// (200Mi stays binary SI).
func quantityFormat(ps *api.PodSet, res string) resource.Format {
	for _, ctr := range ps.Template.Spec.Containers {
		if q, ok := ctr.Resources.Requests[res]; ok {
			return q.Format
		}
		if q, ok := ctr.Resources.Limits[res]; ok {
			return q.Format
		}
	}
	return ""
}

func resourceGroupOf(cq *api.ClusterQueue, res string) *api.QueueResourceGroup {
	for i := range cq.Spec.ResourceGroups {
		if slices.Contains(cq.Spec.ResourceGroups[i].CoveredResources, res) {
			return &cq.Spec.ResourceGroups[i]
		}
	}
	return nil
}

// assignGroup returns the first flavor of rg that fits, or the reasons
// none did (Kueue's words).
func (s *snapshot) assignGroup(c *cqState, ps *api.PodSet, rg *api.QueueResourceGroup, req map[string]int64, a *assignment) (string, []string) {
	var reasons []string
	for _, fq := range rg.Flavors {
		rf := s.flavors[fq.Name]
		if rf == nil {
			reasons = append(reasons, fmt.Sprintf("flavor %s not found", fq.Name))
			continue
		}
		if t, bad := untolerated(rf, ps); bad {
			reasons = append(reasons, fmt.Sprintf("untolerated taint %s in flavor %s", t, fq.Name))
			continue
		}
		if !matchesAffinity(rf, ps) {
			reasons = append(reasons, fmt.Sprintf("flavor %s doesn't match node affinity", fq.Name))
			continue
		}
		ok := true
		for _, res := range rg.CoveredResources {
			v, asked := req[res]
			if !asked {
				continue
			}
			f := fr{fq.Name, res}
			prev := a.usage[f]
			val := prev + v
			if pot := s.potential(c, f); val > pot {
				reasons = append(reasons, fmt.Sprintf("insufficient quota for %s in flavor %s, previously considered podsets requests (%s) + current podset request (%s) > maximum capacity (%s)",
					res, fq.Name, amountString(res, prev), amountString(res, v), amountString(res, pot)))
				a.never = true
				a.over[f] = pot
				ok = false
				continue
			}
			if avail := s.available(c, f); val > avail {
				reasons = append(reasons, fmt.Sprintf("insufficient unused quota for %s in flavor %s, %s more needed", res, fq.Name, amountString(res, val-avail)))
				a.short[f] = val - avail
				ok = false
			}
		}
		if ok {
			return fq.Name, nil
		}
	}
	return "", reasons
}

// amountString prints an amount as Kueue's resource formatter: cpu in
// cores or millicores, memory in binary units, the rest as integers.
func amountString(res string, v int64) string {
	f := resource.DecimalSI
	if res == api.ResourceMemory {
		f = resource.BinarySI
	}
	q := api.AmountQuantity(res, v, f)
	return q.String()
}

// untolerated: the first NoSchedule/NoExecute taint of the flavor the pod
// template (with the flavor's own tolerations) does not tolerate, printed
// as corev1.Taint.ToString.
func untolerated(rf *api.ResourceFlavor, ps *api.PodSet) (string, bool) {
	tols := append(slices.Clone(ps.Template.Spec.Tolerations), rf.Spec.Tolerations...)
	for i := range rf.Spec.NodeTaints {
		t := &rf.Spec.NodeTaints[i]
		if t.Effect != api.TaintEffectNoSched && t.Effect != api.TaintEffectNoExec {
			continue
		}
		if !plugins.TolerationsTolerateTaint(tols, t) {
			if t.Value == "" {
				return t.Key + ":" + t.Effect, true
			}
			return t.Key + "=" + t.Value + ":" + t.Effect, true
		}
	}
	return "", false
}

// matchesAffinity: the pods' nodeSelector does not contradict the flavor's
// node labels (Kueue checks the required node affinity too; skiff's pods
// select nodes by nodeSelector).
func matchesAffinity(rf *api.ResourceFlavor, ps *api.PodSet) bool {
	for k, v := range rf.Spec.NodeLabels {
		if want, ok := ps.Template.Spec.NodeSelector[k]; ok && want != v {
			return false
		}
	}
	return true
}
