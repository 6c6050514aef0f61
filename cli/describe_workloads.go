package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// describe daemonset, statefulset, cronjob and poddisruptionbudget:
// kubectl's sections, then what skiff adds for teaching (the Nodes: and
// Ordinals: sections from kubectl.ExplainDaemonSet/ExplainStatefulSet,
// and a CronJob's next run).

// describeDaemonSet writes kubectl's describeDaemonSet, then a line per
// node saying whether it runs the pod and why not.
func describeDaemonSet(ctx context.Context, w *describeWriter, cl client.Interface, ds *api.DaemonSet, now time.Time) {
	w.line(0, "Name:\t%s\n", ds.Name)
	w.line(0, "Namespace:\t%s\n", ds.Namespace)
	w.line(0, "Selector:\t%s\n", table.Selector(ds.Spec.Selector))
	w.line(0, "Node-Selector:\t%s\n", table.OrNone(labelString(ds.Spec.Template.Spec.NodeSelector)))
	w.labels(0, ds.Labels)
	w.annotations(0, ds.Annotations)
	st := ds.Status
	w.line(0, "Desired Number of Nodes Scheduled: %d\n", st.DesiredNumberScheduled)
	w.line(0, "Current Number of Nodes Scheduled: %d\n", st.CurrentNumberScheduled)
	w.line(0, "Number of Nodes Scheduled with Up-to-date Pods: %d\n", st.UpdatedNumberScheduled)
	w.line(0, "Number of Nodes Scheduled with Available Pods: %d\n", st.NumberAvailable)
	w.line(0, "Number of Nodes Misscheduled: %d\n", st.NumberMisscheduled)
	printPodsStatus(ctx, w, cl, ds)
	printPodTemplate(w, 0, ds.Spec.Template)
	rows, err := kubectl.ExplainDaemonSet(ctx, cl, ds, now)
	if err != nil {
		w.line(0, "Nodes:\t(cannot tell: %v)\n", err)
		return
	}
	if len(rows) == 0 {
		w.line(0, "Nodes:\t<none>\n")
		return
	}
	w.line(0, "Nodes:\n")
	for _, r := range rows {
		if r.Pod == "" {
			w.line(1, "%s:\t%s\n", r.Name, r.Status)
		} else {
			w.line(1, "%s:\t%s: %s\n", r.Name, r.Pod, r.Status)
		}
	}
}

// describeStatefulSet writes kubectl's describeStatefulSet, then a line
// per ordinal saying what its pod and claims do.
func describeStatefulSet(ctx context.Context, w *describeWriter, cl client.Interface, set *api.StatefulSet, now time.Time) {
	w.line(0, "Name:\t%s\n", set.Name)
	w.line(0, "Namespace:\t%s\n", set.Namespace)
	w.line(0, "CreationTimestamp:\t%s\n", describeTime(set.CreationTimestamp.Time))
	w.line(0, "Selector:\t%s\n", table.Selector(set.Spec.Selector))
	w.labels(0, set.Labels)
	w.annotations(0, set.Annotations)
	w.line(0, "Replicas:\t%d desired | %d total\n", table.Replicas(set.Spec.Replicas), set.Status.Replicas)
	w.line(0, "Update Strategy:\t%s\n", set.Spec.UpdateStrategy.Type)
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		w.line(1, "Partition:\t%d\n", *ru.Partition)
	}
	printPodsStatus(ctx, w, cl, set)
	printPodTemplate(w, 0, set.Spec.Template)
	printClaimTemplates(w, set.Spec.VolumeClaimTemplates)
	rows, err := kubectl.ExplainStatefulSet(ctx, cl, set, now)
	switch {
	case err != nil:
		w.line(0, "Ordinals:\t(cannot tell: %v)\n", err)
	case len(rows) == 0:
		w.line(0, "Ordinals:\t<none>\n")
	default:
		w.line(0, "Ordinals:\n")
		for _, r := range rows {
			w.line(1, "%s:\t%s\n", r.Name, r.Status)
		}
	}
}

// printClaimTemplates is kubectl's describeVolumeClaimTemplates.
func printClaimTemplates(w *describeWriter, ts []api.PersistentVolumeClaim) {
	if len(ts) == 0 {
		w.line(0, "Volume Claims:\t<none>\n")
		return
	}
	w.line(0, "Volume Claims:\n")
	for _, t := range ts {
		w.line(1, "Name:\t%s\n", t.Name)
		class := ""
		if t.Spec.StorageClassName != nil {
			class = *t.Spec.StorageClassName
		}
		w.line(1, "StorageClass:\t%s\n", class)
		w.labels(1, t.Labels)
		w.printMap(1, "Annotations", t.Annotations, "=")
		if q, ok := t.Spec.Resources.Requests["storage"]; ok {
			w.line(1, "Capacity:\t%s\n", q.String())
		} else {
			w.line(1, "Capacity:\t<default>\n")
		}
		w.line(1, "Access Modes:\t%s\n", t.Spec.AccessModes)
	}
}

// printPodsStatus is kubectl's "Pods Status" line of the pods owner
// controls.
func printPodsStatus(ctx context.Context, w *describeWriter, cl client.Interface, owner api.Object) {
	running, waiting, succeeded, failed := 0, 0, 0, 0
	m := owner.GetObjectMeta()
	if pods, _, err := client.List[*api.Pod](ctx, cl, m.Namespace, api.ListOptions{}); err == nil {
		for _, p := range pods {
			if !api.IsControlledBy(p, m.UID) {
				continue
			}
			switch p.Status.Phase {
			case api.PodRunning:
				running++
			case api.PodSucceeded:
				succeeded++
			case api.PodFailed:
				failed++
			default:
				waiting++
			}
		}
	}
	w.line(0, "Pods Status:\t%d Running / %d Waiting / %d Succeeded / %d Failed\n", running, waiting, succeeded, failed)
}

// describeCronJob writes kubectl's describeCronJob with the next run
// after Last Schedule Time.
func describeCronJob(w *describeWriter, cj *api.CronJob, now time.Time) {
	w.line(0, "Name:\t%s\n", cj.Name)
	w.line(0, "Namespace:\t%s\n", cj.Namespace)
	w.labels(0, cj.Labels)
	w.annotations(0, cj.Annotations)
	s := cj.Spec
	w.line(0, "Schedule:\t%s\n", s.Schedule)
	w.line(0, "Concurrency Policy:\t%s\n", s.ConcurrencyPolicy)
	w.line(0, "Suspend:\t%s\n", unsetOr(s.Suspend, boolTitle))
	w.line(0, "Time Zone:\t%s\n", unsetOr(s.TimeZone, func(z string) string { return z }))
	w.line(0, "Successful Job History Limit:\t%s\n", unsetOr(s.SuccessfulJobsHistoryLimit, func(n int32) string { return fmt.Sprint(n) }))
	w.line(0, "Failed Job History Limit:\t%s\n", unsetOr(s.FailedJobsHistoryLimit, func(n int32) string { return fmt.Sprint(n) }))
	w.line(0, "Starting Deadline Seconds:\t%s\n", unsetOr(s.StartingDeadlineSeconds, func(n int64) string { return fmt.Sprintf("%ds", n) }))
	js := s.JobTemplate.Spec
	w.line(0, "Selector:\t%s\n", unsetOr(js.Selector, selectorString))
	w.line(0, "Parallelism:\t%s\n", unsetOr(js.Parallelism, func(n int32) string { return fmt.Sprint(n) }))
	w.line(0, "Completions:\t%s\n", unsetOr(js.Completions, func(n int32) string { return fmt.Sprint(n) }))
	if js.ActiveDeadlineSeconds != nil {
		w.line(0, "Active Deadline Seconds:\t%ds\n", *js.ActiveDeadlineSeconds)
	}
	printPodTemplate(w, 0, js.Template)
	if t := cj.Status.LastScheduleTime; t != nil {
		w.line(0, "Last Schedule Time:\t%s\n", describeTime(t.Time))
	} else {
		w.line(0, "Last Schedule Time:\t<unset>\n")
	}
	w.line(0, "Next Schedule Time:\t%s\n", nextRun(cj, now))
	var active []string
	for _, ref := range cj.Status.Active {
		active = append(active, ref.Name)
	}
	w.line(0, "Active Jobs:\t%s\n", table.OrNone(strings.Join(active, ", ")))
}

// nextRun is when the next Job is due, or why none is.
func nextRun(cj *api.CronJob, now time.Time) string {
	next, err := api.CronJobNextRun(cj, now)
	switch {
	case err != nil:
		return "<none>: " + err.Error()
	case next.IsZero():
		return "<none> (suspended)"
	}
	return fmt.Sprintf("%s (in %s)", describeTime(next), next.Sub(now).Round(time.Second))
}

// describePodDisruptionBudget writes kubectl's describePodDisruptionBudgetV1.
func describePodDisruptionBudget(w *describeWriter, pdb *api.PodDisruptionBudget) {
	w.line(0, "Name:\t%s\n", pdb.Name)
	w.line(0, "Namespace:\t%s\n", pdb.Namespace)
	if v := pdb.Spec.MinAvailable; v != nil {
		w.line(0, "Min available:\t%s\n", v.String())
	} else if v := pdb.Spec.MaxUnavailable; v != nil {
		w.line(0, "Max unavailable:\t%s\n", v.String())
	}
	w.line(0, "Selector:\t%s\n", unsetOr(pdb.Spec.Selector, selectorString))
	st := pdb.Status
	w.line(0, "Status:\n")
	w.line(2, "Allowed disruptions:\t%d\n", st.DisruptionsAllowed)
	w.line(2, "Current:\t%d\n", st.CurrentHealthy)
	w.line(2, "Desired:\t%d\n", st.DesiredHealthy)
	w.line(2, "Total:\t%d\n", st.ExpectedPods)
}

// unsetOr is kubectl's "<unset>" for a nil pointer, else f of its value.
func unsetOr[T any](p *T, f func(T) string) string {
	if p == nil {
		return "<unset>"
	}
	return f(*p)
}

func selectorString(s api.LabelSelector) string { return table.Selector(&s) }
