package kubectl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Rollouts of Deployments, DaemonSets and StatefulSets, as kubectl's
// polymorphichelpers (StatusViewer, HistoryViewer, Rollbacker): each kind
// keeps its history its own way, and `rollout` reads and rewinds it.
//
//   - A Deployment keeps one ReplicaSet per pod template; the annotation
//     deployment.kubernetes.io/revision numbers them.
//   - A DaemonSet and a StatefulSet keep ControllerRevisions: each holds a
//     pod template (api.TemplateOfRevision) and its revision number.
//
// Undo copies a revision's template back into the object; its controller
// then rolls it out as the newest revision. Restart stamps the template
// with kubectl.kubernetes.io/restartedAt: a new template like any other.

// Rollable reports the kinds `rollout` works on.
func Rollable(k *api.Kind) bool {
	return k.Group == "apps" && (k.Kind == "Deployment" || k.Kind == "DaemonSet" || k.Kind == "StatefulSet")
}

// RolloutStatus is kubectl's StatusViewer: a message (with its newline,
// as kubectl prints it) and whether the rollout is complete.
func RolloutStatus(obj api.Object) (string, bool, error) {
	switch o := obj.(type) {
	case *api.Deployment:
		return deploymentStatus(o)
	case *api.DaemonSet:
		return daemonSetStatus(o)
	case *api.StatefulSet:
		return statefulSetStatus(o)
	}
	return "", false, fmt.Errorf("no status viewer has been implemented for %s", obj.GetTypeMeta().Kind)
}

func deploymentStatus(d *api.Deployment) (string, bool, error) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for deployment spec update to be observed...\n", false, nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == "Progressing" && c.Reason == "ProgressDeadlineExceeded" {
			return "", false, fmt.Errorf("deployment %q exceeded its progress deadline", d.Name)
		}
	}
	want := replicas(d.Spec.Replicas)
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...\n", d.Name, st.UpdatedReplicas, want), false, nil
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...\n", d.Name, st.Replicas-st.UpdatedReplicas), false, nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...\n", d.Name, st.AvailableReplicas, st.UpdatedReplicas), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out\n", d.Name), true, nil
}

func daemonSetStatus(d *api.DaemonSet) (string, bool, error) {
	if d.Spec.UpdateStrategy.Type != api.RollingUpdate {
		return "", true, fmt.Errorf("rollout status is only available for %s strategy type", api.RollingUpdate)
	}
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for daemon set spec update to be observed...\n", false, nil
	}
	st := d.Status
	switch {
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...\n", d.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled), false, nil
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...\n", d.Name, st.NumberAvailable, st.DesiredNumberScheduled), false, nil
	}
	return fmt.Sprintf("daemon set %q successfully rolled out\n", d.Name), true, nil
}

func statefulSetStatus(s *api.StatefulSet) (string, bool, error) {
	if s.Spec.UpdateStrategy.Type != api.RollingUpdate {
		return "", true, fmt.Errorf("rollout status is only available for %s strategy type", api.RollingUpdate)
	}
	if s.Status.ObservedGeneration == 0 || s.Generation > s.Status.ObservedGeneration {
		return "Waiting for statefulset spec update to be observed...\n", false, nil
	}
	want := replicas(s.Spec.Replicas)
	if s.Status.ReadyReplicas < want {
		return fmt.Sprintf("Waiting for %d pods to be ready...\n", want-s.Status.ReadyReplicas), false, nil
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil && s.Status.UpdatedReplicas < want-*ru.Partition {
			return fmt.Sprintf("Waiting for partitioned roll out to finish: %d out of %d new pods have been updated...\n", s.Status.UpdatedReplicas, want-*ru.Partition), false, nil
		}
		return fmt.Sprintf("partitioned roll out complete: %d new pods have been updated...\n", s.Status.UpdatedReplicas), true, nil
	}
	if s.Status.UpdateRevision != s.Status.CurrentRevision {
		return fmt.Sprintf("waiting for statefulset rolling update to complete %d pods at revision %s...\n", s.Status.UpdatedReplicas, s.Status.UpdateRevision), false, nil
	}
	return fmt.Sprintf("statefulset rolling update complete %d pods at revision %s...\n", s.Status.CurrentReplicas, s.Status.CurrentRevision), true, nil
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Revision is one entry of a rollout's history.
type Revision struct {
	// Number is the revision number.
	Number int64
	// ChangeCause is the kubernetes.io/change-cause annotation ("" if none).
	ChangeCause string
	// Template is the pod template of the revision, as the object had it.
	Template api.PodTemplateSpec
}

// History lists the revisions of obj, oldest first.
func History(ctx context.Context, cl client.Interface, obj api.Object) ([]Revision, error) {
	m := obj.GetObjectMeta()
	var out []Revision
	switch obj.(type) {
	case *api.Deployment:
		rss, _, err := client.List[*api.ReplicaSet](ctx, cl, m.Namespace, api.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, rs := range rss {
			if !api.IsControlledBy(rs, m.UID) {
				continue
			}
			t := api.Clone(rs).Spec.Template
			delete(t.Labels, api.LabelPodTemplateHash)
			n, _ := strconv.ParseInt(rs.Annotations[api.AnnotationRevision], 10, 64)
			out = append(out, Revision{Number: n, ChangeCause: rs.Annotations[api.AnnotationChangeCause], Template: t})
		}
	case *api.DaemonSet, *api.StatefulSet:
		revs, _, err := client.List[*api.ControllerRevision](ctx, cl, m.Namespace, api.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, r := range revs {
			if !api.IsControlledBy(r, m.UID) {
				continue
			}
			t, err := api.TemplateOfRevision(r)
			if err != nil {
				return nil, err
			}
			out = append(out, Revision{Number: r.Revision, ChangeCause: r.Annotations[api.AnnotationChangeCause], Template: *t})
		}
	default:
		return nil, fmt.Errorf("no history viewer has been implemented for %s", obj.GetTypeMeta().Kind)
	}
	slices.SortStableFunc(out, func(a, b Revision) int { return cmp.Compare(a.Number, b.Number) })
	return out, nil
}

// ErrSkipped is Undo's answer when the object already has the template.
var ErrSkipped = errors.New("skipped rollback")

// Undo puts the template of revision to (0: the one before the newest)
// back into the object k/ns/name, as kubectl's Rollbacker. It returns a
// wrapped ErrSkipped ("skipped rollback (current template already matches
// revision N)") when there is nothing to do.
func Undo(ctx context.Context, cl client.Interface, k *api.Kind, ns, name string, to int64) error {
	var result error
	_, err := Update(ctx, cl, k, ns, name, func(obj api.Object) (bool, error) {
		if d, ok := obj.(*api.Deployment); ok && d.Spec.Paused {
			return false, errors.New("you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and try again")
		}
		hist, err := History(ctx, cl, obj)
		if err != nil {
			return false, err
		}
		rev, err := findRevision(hist, to, obj)
		if err != nil {
			return false, err
		}
		t := templateOf(obj)
		if SameTemplate(*t, rev.Template) {
			result = fmt.Errorf("%w (current template already matches revision %d)", ErrSkipped, rev.Number)
			return false, nil
		}
		*t = rev.Template
		return true, nil
	})
	if err != nil {
		return err
	}
	return result
}

func findRevision(hist []Revision, to int64, obj api.Object) (*Revision, error) {
	if to == 0 {
		if len(hist) < 2 {
			if _, ok := obj.(*api.Deployment); ok {
				return nil, fmt.Errorf("no rollout history found for deployment %q", obj.GetObjectMeta().Name)
			}
			return nil, errors.New("no last revision to roll back to")
		}
		return &hist[len(hist)-2], nil
	}
	for i := range hist {
		if hist[i].Number == to {
			return &hist[i], nil
		}
	}
	return nil, fmt.Errorf("unable to find specified revision %d in history", to)
}

// templateOf is the pod template of a rollable object (shared, to change).
func templateOf(obj api.Object) *api.PodTemplateSpec {
	switch o := obj.(type) {
	case *api.Deployment:
		return &o.Spec.Template
	case *api.DaemonSet:
		return &o.Spec.Template
	case *api.StatefulSet:
		return &o.Spec.Template
	}
	return nil
}

// SameTemplate compares pod templates after defaulting both, so a
// template as written and one as stored compare equal.
func SameTemplate(a, b api.PodTemplateSpec) bool {
	wrap := func(t api.PodTemplateSpec) api.Object {
		rs := api.Clone(&api.ReplicaSet{Spec: api.ReplicaSetSpec{Replicas: new(int32), Template: t}})
		api.SetDefaults(rs)
		return rs
	}
	same, err := SameObject(wrap(a), wrap(b))
	return err == nil && same
}

// Restart stamps the object's pod template with
// kubectl.kubernetes.io/restartedAt: every pod is replaced by its
// rollout. A paused Deployment refuses (kubectl's words).
func Restart(ctx context.Context, cl client.Interface, k *api.Kind, ns, name string, now time.Time) error {
	_, err := Update(ctx, cl, k, ns, name, func(obj api.Object) (bool, error) {
		if d, ok := obj.(*api.Deployment); ok && d.Spec.Paused {
			return false, fmt.Errorf("deployments.apps %q can't restart paused deployment (run rollout resume first)", name)
		}
		t := templateOf(obj)
		if t == nil {
			return false, fmt.Errorf("restarting is not supported for %s", k.Kind)
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[api.AnnotationRestartedAt] = now.Format(time.RFC3339)
		return true, nil
	})
	return err
}
