package cli

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/kueue"
	"skiff.dev/skiff/controlplane/kueue/queueorder"
)

// describe workload and the Kueue part of describe job: beyond what Kueue
// prints, a pending workload's position in its queues and why it waits
// (kueue.Explain: which resource ran short, by how much, which admitted
// workloads hold it, what would free it), computed when asked from the
// stored queues, Workloads and flavors of every namespace. A user who may
// not read every namespace gets the condition Kueue wrote and a line
// saying the rest needs that.

var workloadKind = api.MustKindOf(&api.Workload{})

// describeWorkload writes a Workload's sections.
func describeWorkload(ctx context.Context, w *describeWriter, cl client.Interface, wl *api.Workload, now time.Time) {
	w.objectHeader(&wl.ObjectMeta, true)
	controlledBy(w, wl)
	w.line(0, "Queue Name:\t%s\n", table.OrNone(wl.Spec.QueueName))
	w.line(0, "Priority:\t%d\n", queueorder.PriorityOf(wl))
	if ref := wl.Spec.PriorityClassRef; ref != nil {
		w.line(0, "Priority Class:\t%s\n", ref.Name)
	}
	if wl.Spec.Active != nil && !*wl.Spec.Active {
		w.line(0, "Active:\tfalse\n")
	}
	w.line(0, "Pod Sets:\n")
	for _, ps := range wl.Spec.PodSets {
		req, _ := podRequestsLimits(&api.Pod{Spec: ps.Template.Spec})
		w.line(1, "%s:\t%d pod(s), each %s\n", ps.Name, ps.Count, resourceListString(req))
		if tr := ps.TopologyRequest; tr != nil && tr.Required != nil {
			w.line(2, "Required Topology:\t%s\n", *tr.Required)
		} else if tr != nil && tr.Preferred != nil {
			w.line(2, "Preferred Topology:\t%s\n", *tr.Preferred)
		}
	}
	if a := wl.Status.Admission; a != nil {
		w.line(0, "Admission:\n")
		w.line(1, "Cluster Queue:\t%s\n", a.ClusterQueue)
		for _, psa := range a.PodSetAssignments {
			var flavors []string
			for _, r := range slices.Sorted(maps.Keys(psa.Flavors)) {
				flavors = append(flavors, r+": "+psa.Flavors[r])
			}
			w.line(1, "Pod Set %s:\n", psa.Name)
			w.line(2, "Flavors:\t%s\n", table.OrNone(strings.Join(flavors, ", ")))
			w.line(2, "Usage:\t%s\n", resourceListString(psa.ResourceUsage))
			if ta := psa.TopologyAssignment; ta != nil && len(ta.Slices) == 1 && len(ta.Slices[0].ValuesPerLevel) > 0 && ta.Slices[0].ValuesPerLevel[0].Universal != nil {
				w.line(2, "Topology Domain:\t%s=%s\n", strings.Join(ta.Levels, ","), *ta.Slices[0].ValuesPerLevel[0].Universal)
			}
		}
	}
	printWorkloadConditions(w, wl, now)
	printQueueExplanation(ctx, w, cl, wl, 0, now)
}

// printWorkloadConditions writes the conditions as kubectl describe lists
// a custom resource's: type, status, reason, message.
func printWorkloadConditions(w *describeWriter, wl *api.Workload, now time.Time) {
	if len(wl.Status.Conditions) == 0 {
		w.line(0, "Conditions:\t<none>\n")
		return
	}
	w.line(0, "Conditions:\n")
	w.line(1, "Type\tStatus\tReason\tAge\tMessage\n")
	w.line(1, "----\t------\t------\t---\t-------\n")
	for _, c := range wl.Status.Conditions {
		w.line(1, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, shortAge(now, c.LastTransitionTime.Time), c.Message)
	}
}

// printQueueExplanation writes the position and why a pending workload
// waits (nothing for a workload that is not pending).
func printQueueExplanation(ctx context.Context, w *describeWriter, cl client.Interface, wl *api.Workload, level int, now time.Time) {
	if !queueorder.IsPending(wl) {
		return
	}
	e, err := kueue.Explain(ctx, cl, wl.Namespace, wl.Name, now)
	if err != nil {
		if api.ReasonOf(err) == api.ReasonForbidden {
			w.line(level, "Why Pending:\t(needs to read the queues and workloads of every namespace: %s)\n", err)
		} else {
			w.line(level, "Why Pending:\t(unknown: %s)\n", err)
		}
		return
	}
	if e == nil {
		return
	}
	if p := e.Position; p != nil {
		w.line(level, "Position:\t%d in ClusterQueue %s, %d in LocalQueue %s (from 0)\n", p.InClusterQueue, p.ClusterQueue, p.InLocalQueue, p.LocalQueue)
	}
	w.line(level, "Why Pending:\n")
	for _, r := range e.Reasons {
		w.line(level+1, "%s\n", r)
	}
	for _, s := range e.Shortages {
		if s.Never {
			w.line(level+1, "%s in flavor %s:\trequested %s, more than ClusterQueue %s can ever have (%s)\n", s.Resource, s.Flavor, s.Requested, e.ClusterQueue, s.Max)
		} else {
			w.line(level+1, "%s in flavor %s:\trequested %s, nominal quota %s, in use %s, available %s: %s more needed\n",
				s.Resource, s.Flavor, s.Requested, s.Nominal, s.Used, s.Available, s.Needed)
		}
		if len(s.Holders) > 0 {
			w.line(level+2, "Held By:\n")
			w.line(level+3, "Workload\tClusterQueue\tAmount\tPriority\tReserved\n")
			w.line(level+3, "--------\t------------\t------\t--------\t--------\n")
			for _, h := range s.Holders {
				since := shortAge(now, h.Since) + " ago"
				if h.Evicted {
					since += " (being evicted)"
				}
				w.line(level+3, "%s/%s\t%s\t%s\t%d\t%s\n", h.Namespace, h.Name, h.ClusterQueue, h.Amount, h.Priority, since)
			}
		}
		w.line(level+2, "Would Free It:\n")
		for i, f := range s.Frees {
			if i > 0 && !strings.HasPrefix(f, "ClusterQueue ") {
				f = "or " + f
			}
			w.line(level+3, "%s\n", f)
		}
	}
}

// describeJobQueue writes the Kueue part of a queued Job: its LocalQueue,
// its Workload's state and, while pending, why.
func describeJobQueue(ctx context.Context, w *describeWriter, cl client.Interface, j *api.Job, now time.Time) {
	queue := j.Labels[api.QueueNameLabel]
	if queue == "" {
		return
	}
	w.line(0, "Kueue:\n")
	w.line(1, "Local Queue:\t%s\n", queue)
	name := kueue.WorkloadName(j.Name, j.UID)
	o, err := cl.Get(ctx, workloadKind, j.Namespace, name)
	if err != nil {
		w.line(1, "Workload:\t%s (%s)\n", name, err)
		return
	}
	wl := o.(*api.Workload)
	state := "Pending"
	switch {
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished):
		state = "Finished"
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadEvicted) && queueorder.HoldsQuota(wl):
		state = "Evicted"
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted) && wl.Status.Admission != nil:
		state = "Admitted by ClusterQueue " + wl.Status.Admission.ClusterQueue
	case wl.Spec.Active != nil && !*wl.Spec.Active:
		state = "Inactive"
	}
	w.line(1, "Workload:\t%s (%s)\n", wl.Name, state)
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadQuotaReserved); c != nil && c.Status != "True" && c.Message != "" {
		w.line(1, "Message:\t%s\n", c.Message)
	}
	printQueueExplanation(ctx, w, cl, wl, 1, now)
}

// resourceListString is "cpu: 1, memory: 200Mi" in name order, or <none>.
func resourceListString(rl api.ResourceList) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(rl)) {
		q := rl[name]
		parts = append(parts, name+": "+q.String())
	}
	return table.OrNone(strings.Join(parts, ", "))
}
