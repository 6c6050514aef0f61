package kubectl

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
)

// Beyond kubectl: what `skiff describe` adds to a DaemonSet, a
// StatefulSet and a CronJob, so a student reads why a pod is missing or
// not ready, node by node or ordinal by ordinal, without knowing where to
// look. Everything comes from the objects as they are (the same rules the
// controllers use: api.DaemonPodFits), nothing is stored for it.

// WorkloadRow is one node (DaemonSet) or ordinal (StatefulSet) of the
// explanation.
type WorkloadRow struct {
	// Name is the node, or the pod name of the ordinal.
	Name string
	// Pod is the pod there ("" when none).
	Pod string
	// Status says what the pod does or why there is none.
	Status string
}

// ExplainDaemonSet says, for every node, whether it should run a pod of
// ds, which pod it runs and why that pod is not running and ready.
func ExplainDaemonSet(ctx context.Context, cl client.Interface, ds *api.DaemonSet, now time.Time) ([]WorkloadRow, error) {
	nodes, _, err := client.List[*api.Node](ctx, cl, "", api.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := ownedPods(ctx, cl, ds)
	if err != nil {
		return nil, err
	}
	byNode := map[string][]*api.Pod{}
	for _, p := range pods {
		byNode[api.PodTargetNode(p)] = append(byNode[api.PodTargetNode(p)], p)
	}
	spec := api.Clone(ds).Spec.Template.Spec
	api.AddDaemonTolerations(&spec)
	slices.SortFunc(nodes, func(a, b *api.Node) int { return strings.Compare(a.Name, b.Name) })
	var rows []WorkloadRow
	for _, n := range nodes {
		run, cont, why := api.DaemonPodFits(&spec, n)
		ps := byNode[n.Name]
		switch {
		case !run && len(ps) == 0:
			rows = append(rows, WorkloadRow{Name: n.Name, Status: "not eligible: " + why})
		case !run && cont:
			rows = append(rows, WorkloadRow{Name: n.Name, Pod: ps[0].Name, Status: PodExplanation(ps[0], now) + " (stays; new pods would not come: " + why + ")"})
		case !run:
			rows = append(rows, WorkloadRow{Name: n.Name, Pod: ps[0].Name, Status: "to be removed: " + why})
		case len(ps) == 0:
			rows = append(rows, WorkloadRow{Name: n.Name, Status: "no pod yet: the daemonset controller makes one"})
		default:
			for _, p := range ps {
				rows = append(rows, WorkloadRow{Name: n.Name, Pod: p.Name, Status: PodExplanation(p, now)})
			}
		}
	}
	return rows, nil
}

// ExplainStatefulSet says, for every ordinal of set, which pod it has,
// its claims, and why it is not running and ready (or not made yet).
func ExplainStatefulSet(ctx context.Context, cl client.Interface, set *api.StatefulSet, now time.Time) ([]WorkloadRow, error) {
	pods, err := ownedPods(ctx, cl, set)
	if err != nil {
		return nil, err
	}
	byName := map[string]*api.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	start := 0
	if set.Spec.Ordinals != nil {
		start = int(set.Spec.Ordinals.Start)
	}
	n := int(replicas(set.Spec.Replicas))
	ordered := set.Spec.PodManagementPolicy != api.ParallelPodManagement
	var rows []WorkloadRow
	blocker := ""
	for ord := start; ord < start+n; ord++ {
		name := fmt.Sprintf("%s-%d", set.Name, ord)
		row := WorkloadRow{Name: name}
		p := byName[name]
		switch {
		case p == nil && blocker != "":
			row.Status = "not made yet: waiting for " + blocker + " to be Running and Ready (podManagementPolicy OrderedReady)"
		case p == nil:
			row.Status = "not made yet: the statefulset controller makes it"
		default:
			row.Pod = p.Name
			row.Status = PodExplanation(p, now)
		}
		if claims := claimsOf(ctx, cl, set, ord); claims != "" {
			row.Status += "; " + claims
		}
		if ordered && blocker == "" && (p == nil || !runningReady(p)) {
			blocker = name
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// claimsOf describes the claims of ordinal: "claim www-web-0 Bound".
func claimsOf(ctx context.Context, cl client.Interface, set *api.StatefulSet, ord int) string {
	var parts []string
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := fmt.Sprintf("%s-%s-%d", t.Name, set.Name, ord)
		c, err := client.Get[*api.PersistentVolumeClaim](ctx, cl, set.Namespace, name)
		switch {
		case api.IsNotFound(err):
			parts = append(parts, "claim "+name+" not made yet")
		case err != nil:
			parts = append(parts, "claim "+name+": "+err.Error())
		case c.Status.Phase == "Pending":
			parts = append(parts, "claim "+name+" Pending (a WaitForFirstConsumer claim binds once its pod is scheduled)")
		default:
			parts = append(parts, "claim "+name+" "+c.Status.Phase)
		}
	}
	return strings.Join(parts, ", ")
}

// ownedPods are the pods in owner's namespace it controls.
func ownedPods(ctx context.Context, cl client.Interface, owner api.Object) ([]*api.Pod, error) {
	m := owner.GetObjectMeta()
	all, _, err := client.List[*api.Pod](ctx, cl, m.Namespace, api.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*api.Pod
	for _, p := range all {
		if api.IsControlledBy(p, m.UID) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *api.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func runningReady(p *api.Pod) bool {
	if p.Status.Phase != api.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// PodExplanation is a pod's state in one line, with the reason a student
// needs: kubectl's STATUS, then why it is Pending (the scheduler's
// message), which container waits and why, or that it runs but is not
// ready.
func PodExplanation(p *api.Pod, now time.Time) string {
	st := table.PodStatus(p, now).Status
	switch {
	case p.DeletionTimestamp != nil:
		return "Terminating"
	case p.Spec.NodeName == "":
		for _, c := range p.Status.Conditions {
			if c.Type == api.PodScheduled && c.Status == api.ConditionFalse && c.Message != "" {
				return "Pending, not scheduled: " + c.Message
			}
		}
		return "Pending, not scheduled yet"
	case runningReady(p):
		return "Running, Ready on " + p.Spec.NodeName
	}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			msg := fmt.Sprintf("%s: container %s waiting (%s)", st, cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			return msg
		}
		if t := cs.State.Terminated; t != nil && p.Status.Phase == api.PodRunning {
			return fmt.Sprintf("%s: container %s terminated (%s, exit code %d)", st, cs.Name, t.Reason, t.ExitCode)
		}
	}
	if p.Status.Phase == api.PodRunning {
		return "Running, not Ready: a container's readiness probe has not passed"
	}
	return st
}
