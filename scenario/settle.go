package scenario

import (
	"context"
	"fmt"
	"slices"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// state is the cluster as one read saw it.
type state struct {
	pods   []*api.Pod
	nodes  []*api.Node
	failed map[string]bool
	jobs   []*api.Job
	rss    []*api.ReplicaSet
	deps   []*api.Deployment
	byUID  map[string]ownerOf // jobs, replica sets and deployments by uid
}

// ownerOf is an owning object: its key (KIND/NAMESPACE/NAME) and its
// own controller's uid.
type ownerOf struct {
	key   string
	owner string
}

// settleInterval is how often settle reads the cluster again.
const settleInterval = 10 * time.Millisecond

// read lists what settle and the expectations look at.
func (r *runner) read(ctx context.Context) (*state, error) {
	c := r.sc.c
	st := &state{failed: map[string]bool{}, byUID: map[string]ownerOf{}}
	var err error
	if st.pods, _, err = client.List[*api.Pod](ctx, c, "", api.ListOptions{}); err != nil {
		return nil, err
	}
	if st.nodes, _, err = client.List[*api.Node](ctx, c, "", api.ListOptions{}); err != nil {
		return nil, err
	}
	if st.jobs, _, err = client.List[*api.Job](ctx, c, "", api.ListOptions{}); err != nil {
		return nil, err
	}
	if st.rss, _, err = client.List[*api.ReplicaSet](ctx, c, "", api.ListOptions{}); err != nil {
		return nil, err
	}
	if st.deps, _, err = client.List[*api.Deployment](ctx, c, "", api.ListOptions{}); err != nil {
		return nil, err
	}
	for _, n := range st.nodes {
		if s := r.sc.sim(n.Name); s != nil && s.Failed(n.Name) {
			st.failed[n.Name] = true
		}
	}
	add := func(kind string, o api.Object) {
		m := o.GetObjectMeta()
		of := ownerOf{key: ownerKey(kind, m.Namespace, m.Name)}
		if ref := api.ControllerOf(o); ref != nil {
			of.owner = ref.UID
		}
		st.byUID[m.UID] = of
	}
	for _, j := range st.jobs {
		add("Job", j)
	}
	for _, rs := range st.rss {
		add("ReplicaSet", rs)
	}
	for _, d := range st.deps {
		add("Deployment", d)
	}
	slices.SortFunc(st.pods, func(a, b *api.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return compareStrings(api.KeyOf(a), api.KeyOf(b))
	})
	return st, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ownerChain is the keys of pod p (Pod/NS/NAME) and of its controllers up
// the chain (its ReplicaSet, that one's Deployment).
func (st *state) ownerChain(p *api.Pod) []string {
	keys := []string{ownerKey("Pod", p.Namespace, p.Name)}
	uid := ""
	if ref := api.ControllerOf(p); ref != nil {
		uid = ref.UID
	}
	for range 4 {
		o, ok := st.byUID[uid]
		if !ok {
			break
		}
		keys = append(keys, o.key)
		uid = o.owner
	}
	return keys
}

// settle reads the cluster until it has settled (unsettled says why
// not), or the step's deadline passes.
func (r *runner) settle(ctx context.Context) (*state, error) {
	deadline := time.Now().Add(r.opts.StepTimeout)
	t := time.NewTicker(settleInterval)
	defer t.Stop()
	for {
		st, err := r.read(ctx)
		if err != nil {
			return nil, err
		}
		why := r.unsettled(st)
		if why == "" {
			why, err = r.untraced(ctx, st)
			if err != nil {
				return nil, err
			}
		}
		if why == "" {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not settled after %v: %s", r.opts.StepTimeout, why)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C: // the poll interval of a deadline-bound wait for a condition
		}
	}
}

// unsettled says what the cluster is still doing, or "" when it is done:
// the controllers have made the pods their objects ask for, every pod is
// running on a live node or waits in the scheduler's unschedulable queue
// (tried, fits nowhere), and the failed nodes are marked and emptied.
func (r *runner) unsettled(st *state) string {
	if why := st.controllersBusy(); why != "" {
		return why
	}
	for _, n := range st.nodes {
		if st.failed[n.Name] && !slices.ContainsFunc(n.Spec.Taints, func(t api.Taint) bool {
			return t.Key == api.TaintUnreachable && t.Effect == api.TaintEffectNoExec
		}) {
			return "node " + n.Name + " failed: the node lifecycle controller has not marked it unreachable yet"
		}
	}
	sched := r.sc.cp.Scheduler()
	if sched == nil {
		return "the scheduler is not running"
	}
	profiles := profileNames(sched.Config())
	for _, p := range st.pods {
		key := api.KeyOf(p)
		terminal := p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed
		switch {
		case p.DeletionTimestamp != nil:
			return "pod " + key + " is being deleted"
		case st.orphan(p):
			return "pod " + key + ": its owner is gone, the garbage collector has yet to delete it"
		case terminal:
		case p.Spec.NodeName != "" && st.failed[p.Spec.NodeName]:
			return "pod " + key + " is on failed node " + p.Spec.NodeName + ", not evicted yet"
		case p.Spec.NodeName != "" && p.Status.Phase != api.PodRunning:
			return "pod " + key + " is bound to " + p.Spec.NodeName + ", not Running yet"
		case p.Spec.NodeName != "":
		case !profiles[schedulerName(p)]:
			// No profile has its schedulerName: it stays Pending, untouched.
		default:
			if where := sched.Queue().Where(key); where != "unschedulable" {
				if where == "" {
					where = "not queued yet"
				}
				return "pod " + key + " waits for the scheduler (" + where + ")"
			}
		}
	}
	return ""
}

// untraced names a pod whose last scheduling attempt is not in its
// trace yet ("" none): the scheduler writes the trace after it binds a
// pod or puts it aside, and the placements print the reasons from it.
func (r *runner) untraced(ctx context.Context, st *state) (string, error) {
	var profiles map[string]bool
	if sched := r.sc.cp.Scheduler(); sched != nil {
		profiles = profileNames(sched.Config())
	}
	for _, p := range st.pods {
		var sig string
		switch {
		case p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed:
			continue
		case p.Spec.NodeName != "":
			sig = "bound to " + p.Spec.NodeName
		default:
			c := podScheduled(p)
			if c == nil && profiles[schedulerName(p)] {
				// In the unschedulable queue (unsettled checked) before
				// the scheduler's status write reached the API.
				return "pod " + api.KeyOf(p) + ": the scheduler has not written its PodScheduled condition yet", nil
			}
			if c == nil || c.Status != api.ConditionFalse {
				continue // never tried: no profile has its schedulerName
			}
			sig = c.Message
		}
		key := api.KeyOf(p) + "/" + string(p.UID)
		if r.traced[key] == sig {
			continue
		}
		tr, err := r.sc.c.GetTrace(ctx, p.Namespace, p.Name)
		if api.IsNotFound(err) {
			return "pod " + api.KeyOf(p) + " has no trace yet", nil
		}
		if err != nil {
			return "", fmt.Errorf("trace of pod %s: %w", api.KeyOf(p), err)
		}
		if lastAttempt(tr.Spans) != sig {
			return "pod " + api.KeyOf(p) + ": the scheduler has not written its last attempt to the trace yet", nil
		}
		r.traced[key] = sig
	}
	return "", nil
}

// lastAttempt is what the last scheduling attempt in a trace came to:
// "bound to NODE", or the filter's message of an attempt that found no
// node.
func lastAttempt(spans []api.TraceSpan) string {
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		if s.Component != "scheduler" {
			continue
		}
		switch s.Step {
		case "bind":
			return s.Message
		case "filter":
			m, _ := s.Details["message"].(string)
			return m
		}
	}
	return ""
}

func podScheduled(p *api.Pod) *api.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == api.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// profileNames is the set of the configuration's schedulerNames.
func profileNames(cfg *config.Config) map[string]bool {
	out := map[string]bool{}
	for _, p := range cfg.Profiles {
		out[p.SchedulerName] = true
	}
	return out
}

func schedulerName(p *api.Pod) string {
	if p.Spec.SchedulerName == "" {
		return "default-scheduler"
	}
	return p.Spec.SchedulerName
}

// orphan: the pod's (or its ReplicaSet's) controller is gone.
func (st *state) orphan(p *api.Pod) bool {
	ref := api.ControllerOf(p)
	if ref == nil {
		return false
	}
	switch ref.Kind {
	case "Job", "ReplicaSet":
	default:
		return false // owners settle does not follow
	}
	o, ok := st.byUID[ref.UID]
	if !ok {
		return true
	}
	if o.owner != "" {
		_, ok := st.byUID[o.owner]
		return !ok
	}
	return false
}

// controllersBusy says which Job, ReplicaSet or Deployment has not yet
// made the pods it asks for ("" none).
func (st *state) controllersBusy() string {
	live := map[string]int{}      // controller uid → pods not finished, not being deleted
	succeeded := map[string]int{} // Job uid → pods Succeeded
	for _, p := range st.pods {
		ref := api.ControllerOf(p)
		if ref == nil {
			continue
		}
		switch {
		case p.Status.Phase == api.PodSucceeded:
			succeeded[ref.UID]++
		case p.Status.Phase != api.PodFailed && p.DeletionTimestamp == nil:
			live[ref.UID]++
		}
	}
	for _, j := range st.jobs {
		key := "job " + api.KeyOf(j)
		if j.DeletionTimestamp != nil {
			return key + " is being deleted"
		}
		if j.Status.Succeeded != int32(succeeded[j.UID]) {
			return fmt.Sprintf("%s counts %d succeeded pods of %d", key, j.Status.Succeeded, succeeded[j.UID])
		}
		if api.IsJobFinished(j) || (j.Spec.Suspend != nil && *j.Spec.Suspend) {
			continue // a suspended Job (Kueue's, waiting) has no pods
		}
		want := int32(1)
		if j.Spec.Parallelism != nil {
			want = *j.Spec.Parallelism
		}
		if c := j.Spec.Completions; c != nil {
			if j.Status.Succeeded >= *c {
				return key + " has all its completions but is not Complete yet"
			}
			want = min(want, *c-j.Status.Succeeded)
		} else if j.Status.Succeeded > 0 {
			want = 0 // one success finishes a Job without completions
		}
		if int32(live[j.UID]) != want || j.Status.Active != want {
			return fmt.Sprintf("%s has %d of %d active pods (status says %d)", key, live[j.UID], want, j.Status.Active)
		}
	}
	for _, rs := range st.rss {
		want := int32(1)
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		if rs.Status.ObservedGeneration < rs.Generation || int32(live[rs.UID]) != want || rs.Status.Replicas != want {
			return fmt.Sprintf("replicaset %s has %d of %d pods", api.KeyOf(rs), live[rs.UID], want)
		}
	}
	for _, d := range st.deps {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != want || d.Status.UpdatedReplicas != want {
			return fmt.Sprintf("deployment %s has %d of %d replicas up to date", api.KeyOf(d), d.Status.UpdatedReplicas, want)
		}
	}
	return ""
}

// Usage is the GPUs of the live nodes once a step settled.
type Usage struct {
	// GPUs in all, and taken by pods not finished.
	GPUs, Used int64
	// Fragmented are the free GPUs of nodes partly used: a job that
	// needs a whole node cannot have them.
	Fragmented int64
	// FreeNodes have GPUs and none taken.
	FreeNodes int
	// Pending pods (not bound).
	Pending int
}

func (u Usage) String() string {
	pct := int64(0)
	if u.GPUs > 0 {
		pct = u.Used * 100 / u.GPUs
	}
	return fmt.Sprintf("GPUs %d/%d used (%d%%), %d fragmented, %d nodes wholly free, %d pods Pending",
		u.Used, u.GPUs, pct, u.Fragmented, u.FreeNodes, u.Pending)
}

// gpusOf is a pod's nvidia.com/gpu request.
func gpusOf(p *api.Pod) int64 {
	req, _ := framework.PodRequests(p)
	return req.Scalar[api.ResourceNvidiaGPU]
}

// usage sums the GPUs of the live nodes.
func (st *state) usage() Usage {
	var u Usage
	used := map[string]int64{}
	for _, p := range st.pods {
		if p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed {
			continue
		}
		if p.Spec.NodeName == "" {
			u.Pending++
			continue
		}
		used[p.Spec.NodeName] += gpusOf(p)
	}
	for _, n := range st.nodes {
		if st.failed[n.Name] {
			continue
		}
		q := n.Status.Allocatable[api.ResourceNvidiaGPU]
		total := q.Value()
		if total == 0 {
			continue
		}
		taken := min(used[n.Name], total)
		u.GPUs += total
		u.Used += taken
		switch {
		case taken == 0:
			u.FreeNodes++
		case taken < total:
			u.Fragmented += total - taken
		}
	}
	return u
}
