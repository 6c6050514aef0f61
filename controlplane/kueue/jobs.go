package kueue

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The job side, as Kueue's job reconciler (pkg/controller/jobframework,
// jobs/job): a Job with a queue name gets its Workload; an admitted
// Workload starts its Job with the flavors' node labels and tolerations; an
// evicted one stops it, restores its template and, once its pods are gone,
// gives the quota back and queues it again; a finished Job finishes its
// Workload, which releases the quota.

// WorkloadName is Kueue's name of a Job's Workload: job-NAME-HASH, HASH
// the first 5 hex digits of the SHA-1 of the owner's kind, group, name and
// uid (jobframework.GetWorkloadNameForOwnerWithGVK).
func WorkloadName(jobName, jobUID string) string {
	h := sha1.New()
	for i, s := range []string{"Job", "batch", jobName, jobUID} {
		if i > 0 {
			h.Write([]byte("\n"))
		}
		h.Write([]byte(s))
	}
	prefix := "job-" + jobName
	if len(prefix) > 247 {
		prefix = prefix[:247]
	}
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))[:5]
}

// ReconcileJob syncs the Job named by key with its Workload.
func (m *Manager) ReconcileJob(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	o, ok, err := m.read.get(ctx, jobKind, ns, name)
	if err != nil {
		return err
	}
	if !ok {
		return m.deleteOrphans(ctx, ns, name)
	}
	job := o.(*api.Job)
	queue := job.Labels[api.QueueNameLabel]
	if queue == "" || job.DeletionTimestamp != nil {
		return nil
	}
	wo, ok, err := m.read.get(ctx, workloadKind, ns, WorkloadName(job.Name, job.UID))
	if err != nil {
		return err
	}
	if !ok {
		m.mu.Lock()
		a, assumed := m.assumed[api.Key(ns, WorkloadName(job.Name, job.UID))]
		m.mu.Unlock()
		if !assumed {
			if api.IsJobFinished(job) {
				return nil
			}
			return m.createWorkload(ctx, job, queue)
		}
		wo = a
	}
	wl := wo.(*api.Workload)
	if m.assumedNewer(wl) != nil {
		wl = m.assumedNewer(wl)
	}
	switch {
	case api.IsJobFinished(job):
		return m.finish(ctx, job, wl)
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished):
		return nil
	case holdsQuota(wl) && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadEvicted):
		return m.stop(ctx, job, wl)
	case holdsQuota(wl) && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted):
		return m.start(ctx, job, wl)
	default:
		return m.keepSuspended(ctx, job, wl)
	}
}

// assumedNewer returns this manager's own newer write of wl, if any.
func (m *Manager) assumedNewer(wl *api.Workload) *api.Workload {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.assumed[api.Key(wl.Namespace, wl.Name)]; ok && !rvNewerOrEqual(wl.ResourceVersion, a.ResourceVersion) {
		return a
	}
	return nil
}

// createWorkload creates the Workload of job: one pod set, main.
func (m *Manager) createWorkload(ctx context.Context, job *api.Job, queue string) error {
	count := int32(1)
	if job.Spec.Parallelism != nil {
		count = *job.Spec.Parallelism
	}
	if job.Spec.Completions != nil && *job.Spec.Completions < count {
		count = *job.Spec.Completions
	}
	tmpl := api.Clone(&api.Pod{ObjectMeta: job.Spec.Template.ObjectMeta, Spec: job.Spec.Template.Spec})
	ps := api.PodSet{Name: "main", Template: api.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}, Count: count}
	if v, ok := job.Spec.Template.Annotations[api.PodSetRequiredTopologyAnnotation]; ok {
		ps.TopologyRequest = &api.PodSetTopologyRequest{Required: &v}
	} else if v, ok := job.Spec.Template.Annotations[api.PodSetPreferredTopologyAnnotation]; ok {
		ps.TopologyRequest = &api.PodSetTopologyRequest{Preferred: &v}
	}
	wl := &api.Workload{
		ObjectMeta: api.ObjectMeta{Name: WorkloadName(job.Name, job.UID), Namespace: job.Namespace,
			Labels:          map[string]string{JobUIDLabel: job.UID},
			OwnerReferences: []api.OwnerReference{api.NewControllerRef(job)}},
		Spec: api.WorkloadSpec{PodSets: []api.PodSet{ps}, QueueName: queue},
	}
	if pc := job.Spec.Template.Spec.PriorityClassName; pc != "" {
		p, err := m.priorityOf(ctx, pc)
		if err != nil {
			return err
		}
		wl.Spec.Priority = &p
		wl.Spec.PriorityClassRef = &api.PriorityClassRef{Group: api.PodPriorityClassGroup, Kind: api.PodPriorityClassKind, Name: pc}
	} else {
		zero := int32(0)
		wl.Spec.Priority = &zero
	}
	created, err := m.c.Create(ctx, wl)
	if err != nil {
		if api.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("create workload for job %s/%s: %w", job.Namespace, job.Name, err)
	}
	m.assume(created.(*api.Workload))
	m.events.Eventf(ctx, job, api.EventNormal, "CreatedWorkload", "Created Workload: %s/%s", created.GetObjectMeta().Namespace, created.GetObjectMeta().Name)
	m.log.Info("created workload", "job", api.Key(job.Namespace, job.Name), "workload", created.GetObjectMeta().Name, "queue", queue)
	return nil
}

func (m *Manager) priorityOf(ctx context.Context, name string) (int32, error) {
	for _, pc := range api.SystemPriorityClasses() {
		if pc.Name == name {
			return pc.Value, nil
		}
	}
	o, ok, err := m.read.get(ctx, priorityKind, "", name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	return o.(*api.PriorityClass).Value, nil
}

// start unsuspends an admitted workload's Job with the assigned flavors'
// node labels (and a topology domain) in its nodeSelector and their
// tolerations appended, then watches it become ready (waitForPodsReady).
func (m *Manager) start(ctx context.Context, job *api.Job, wl *api.Workload) error {
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		next := api.Clone(job)
		m.injectPodSetInfo(next, wl)
		f := false
		next.Spec.Suspend = &f
		if _, err := m.c.Update(ctx, next); err != nil {
			if api.IsConflict(err) || api.IsNotFound(err) {
				return client.RequeueAfter(0)
			}
			return fmt.Errorf("start job %s/%s: %w", job.Namespace, job.Name, err)
		}
		m.events.Eventf(ctx, job, api.EventNormal, "Started", "Admitted by clusterQueue %s", wl.Status.Admission.ClusterQueue)
		m.log.Info("started job", "job", api.Key(job.Namespace, job.Name), "clusterQueue", wl.Status.Admission.ClusterQueue)
	}
	return m.podsReady(ctx, job, wl)
}

// injectPodSetInfo is Kueue's podset.Merge of the admission into the job's
// template: flavor nodeLabels, the topology domain, tolerations.
func (m *Manager) injectPodSetInfo(job *api.Job, wl *api.Workload) {
	ctx := context.Background()
	t := &job.Spec.Template.Spec
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		for _, fname := range slices.Sorted(maps.Values(psa.Flavors)) {
			o, ok, _ := m.read.get(ctx, flavorKind, "", fname)
			if !ok {
				continue
			}
			rf := o.(*api.ResourceFlavor)
			if len(rf.Spec.NodeLabels) > 0 && t.NodeSelector == nil {
				t.NodeSelector = map[string]string{}
			}
			maps.Copy(t.NodeSelector, rf.Spec.NodeLabels)
			for _, tol := range rf.Spec.Tolerations {
				if !slices.Contains(t.Tolerations, tol) {
					t.Tolerations = append(t.Tolerations, tol)
				}
			}
		}
		if ta := psa.TopologyAssignment; ta != nil && len(ta.Slices) == 1 {
			if t.NodeSelector == nil {
				t.NodeSelector = map[string]string{}
			}
			for i, level := range ta.Levels {
				if i < len(ta.Slices[0].ValuesPerLevel) && ta.Slices[0].ValuesPerLevel[i].Universal != nil {
					t.NodeSelector[level] = *ta.Slices[0].ValuesPerLevel[i].Universal
				}
			}
		}
	}
}

// podsReady keeps the PodsReady condition and evicts a workload whose pods
// are not ready within waitForPodsReady's timeout.
func (m *Manager) podsReady(ctx context.Context, job *api.Job, wl *api.Workload) error {
	count := int32(0)
	for _, ps := range wl.Spec.PodSets {
		count += ps.Count
	}
	ready := job.Status.Succeeded
	if job.Status.Ready != nil {
		ready += *job.Status.Ready
	}
	now := m.now()
	next := api.Clone(wl)
	var changed bool
	if ready >= count {
		changed = setCondition(next, api.WorkloadPodsReady, metav1.ConditionTrue, "Started", "All pods reached readiness and the workload is running", now)
	} else if c := apimeta.FindStatusCondition(next.Status.Conditions, api.WorkloadPodsReady); c == nil || c.Status == metav1.ConditionTrue {
		changed = setCondition(next, api.WorkloadPodsReady, metav1.ConditionFalse, "WaitForStart", "Not all pods are ready or succeeded", now)
	}
	w := m.cfg.WaitForPodsReady
	var requeue time.Duration
	if w.Enable && ready < count && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadPodsReady) {
		since := now
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadAdmitted); c != nil {
			since = c.LastTransitionTime.Time
		}
		if left := since.Add(w.Timeout).Sub(now); left > 0 {
			requeue = left
		} else {
			n := int32(1)
			if rs := next.Status.RequeueState; rs != nil && rs.Count != nil {
				n = *rs.Count + 1
			}
			at := api.NewTime(now.Add(w.backoff(n)))
			next.Status.RequeueState = &api.RequeueState{Count: &n, RequeueAt: &at}
			msg := "Exceeded the PodsReady timeout " + api.Key(wl.Namespace, wl.Name)
			setCondition(next, api.WorkloadEvicted, metav1.ConditionTrue, api.WorkloadEvictedByPodsReadyTimeout, msg, now)
			if w.BackoffLimitCount > 0 && n > w.BackoffLimitCount {
				f := false
				next.Spec.Active = &f // deactivated: written below with the spec
			}
			changed = true
			m.events.Eventf(ctx, wl, api.EventNormal, "EvictedDueToPodsReadyTimeout", "%s", msg)
			m.log.Info("evicted", "workload", api.Key(wl.Namespace, wl.Name), "reason", api.WorkloadEvictedByPodsReadyTimeout, "requeueAt", at.Time)
		}
	}
	if changed {
		if err := m.writeWorkloadStatus(ctx, next); err != nil {
			return err
		}
	}
	if requeue > 0 {
		return client.RequeueAfter(requeue)
	}
	return nil
}

func (m *Manager) writeWorkloadStatus(ctx context.Context, next *api.Workload) error {
	written, err := m.c.UpdateStatus(ctx, next)
	if err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return client.RequeueAfter(0)
		}
		return fmt.Errorf("update workload %s/%s: %w", next.Namespace, next.Name, err)
	}
	m.assume(written.(*api.Workload))
	return nil
}

// stop suspends an evicted workload's Job, restores its template and, once
// no pod of it is active, releases the quota: the workload is pending again.
func (m *Manager) stop(ctx context.Context, job *api.Job, wl *api.Workload) error {
	ev := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadEvicted)
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		next := api.Clone(job)
		t := true
		next.Spec.Suspend = &t
		if _, err := m.c.Update(ctx, next); err != nil {
			if api.IsConflict(err) || api.IsNotFound(err) {
				return client.RequeueAfter(0)
			}
			return fmt.Errorf("stop job %s/%s: %w", job.Namespace, job.Name, err)
		}
		m.events.Eventf(ctx, job, api.EventNormal, "Stopped", "%s", ev.Message)
		return nil // the job controller deletes the pods; their going brings us back
	}
	if restored, changed := restoreTemplate(job, wl); changed && job.Status.StartTime == nil {
		if _, err := m.c.Update(ctx, restored); err != nil {
			if api.IsConflict(err) || api.IsNotFound(err) {
				return client.RequeueAfter(0)
			}
			return fmt.Errorf("restore job %s/%s: %w", job.Namespace, job.Name, err)
		}
		return nil
	}
	if job.Status.Active > 0 || (job.Status.Terminating != nil && *job.Status.Terminating > 0) {
		return nil // pods still going
	}
	next := api.Clone(wl)
	next.Status.Admission = nil
	now := m.now()
	setCondition(next, api.WorkloadQuotaReserved, metav1.ConditionFalse, api.WorkloadPending, ev.Message, now)
	setCondition(next, api.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", "The workload has no reservation", now)
	setCondition(next, api.WorkloadPodsReady, metav1.ConditionFalse, "WaitForStart", "Not all pods are ready or succeeded", now)
	setCondition(next, api.WorkloadRequeued, metav1.ConditionTrue, ev.Reason, ev.Message, now)
	if err := m.writeWorkloadStatus(ctx, next); err != nil {
		return err
	}
	m.log.Info("released quota", "workload", api.Key(wl.Namespace, wl.Name), "reason", ev.Reason)
	return nil
}

// restoreTemplate puts back the nodeSelector and tolerations the job had
// when its workload was created (Kueue's RestorePodSetsInfo).
func restoreTemplate(job *api.Job, wl *api.Workload) (*api.Job, bool) {
	if len(wl.Spec.PodSets) == 0 {
		return job, false
	}
	orig := wl.Spec.PodSets[0].Template.Spec
	cur := job.Spec.Template.Spec
	if reflect.DeepEqual(emptyMap(orig.NodeSelector), emptyMap(cur.NodeSelector)) && reflect.DeepEqual(orig.Tolerations, cur.Tolerations) {
		return job, false
	}
	next := api.Clone(job)
	next.Spec.Template.Spec.NodeSelector = maps.Clone(orig.NodeSelector)
	next.Spec.Template.Spec.Tolerations = slices.Clone(orig.Tolerations)
	return next, true
}

func emptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// keepSuspended: a Job whose workload has no admission stays suspended,
// with its template as created.
func (m *Manager) keepSuspended(ctx context.Context, job *api.Job, wl *api.Workload) error {
	next := job
	changed := false
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		next = api.Clone(job)
		t := true
		next.Spec.Suspend = &t
		changed = true
	} else if r, ok := restoreTemplate(job, wl); ok && job.Status.StartTime == nil {
		next, changed = r, true
	}
	if !changed {
		return nil
	}
	if _, err := m.c.Update(ctx, next); err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return client.RequeueAfter(0)
		}
		return fmt.Errorf("suspend job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// finish marks the workload of a finished Job Finished, which releases its
// quota.
func (m *Manager) finish(ctx context.Context, job *api.Job, wl *api.Workload) error {
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished) {
		return nil
	}
	reason, msg := api.WorkloadFinishedReasonSucceeded, "Job finished successfully"
	if c := job.Condition(api.JobFailed); c != nil && c.Status == api.ConditionTrue {
		reason, msg = api.WorkloadFinishedReasonFailed, c.Message
	}
	next := api.Clone(wl)
	setCondition(next, api.WorkloadFinished, metav1.ConditionTrue, reason, msg, m.now())
	if err := m.writeWorkloadStatus(ctx, next); err != nil {
		return err
	}
	m.events.Eventf(ctx, job, api.EventNormal, "FinishedWorkload", "Workload '%s' is declared finished", api.Key(wl.Namespace, wl.Name))
	m.log.Info("finished", "workload", api.Key(wl.Namespace, wl.Name), "reason", reason)
	return nil
}

// deleteOrphans deletes the workloads of a Job that is gone (Kueue's
// owner reference makes the garbage collector do it; skiff's collector
// does not follow Workloads).
func (m *Manager) deleteOrphans(ctx context.Context, ns, jobName string) error {
	objs, err := m.read.list(ctx, workloadKind)
	if err != nil {
		return err
	}
	for _, o := range objs {
		wl := o.(*api.Workload)
		if wl.Namespace != ns {
			continue
		}
		for _, ref := range wl.OwnerReferences {
			if ref.Kind == "Job" && ref.Name == jobName {
				if err := m.c.Delete(ctx, workloadKind, ns, wl.Name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
					return fmt.Errorf("delete workload %s/%s of deleted job: %w", ns, wl.Name, err)
				}
			}
		}
	}
	return nil
}
