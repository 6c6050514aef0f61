package kubectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Node maintenance, as kubectl's cordon, uncordon and drain
// (k8s.io/kubectl/pkg/drain):
//
//   - cordon sets the node's spec.unschedulable: the scheduler's
//     NodeUnschedulable filter keeps new pods away; pods already there stay.
//   - uncordon clears it.
//   - drain cordons, then deletes the pods on the node so their
//     controllers recreate them elsewhere, and waits until they are gone.
//     It refuses, unless told otherwise, pods that would be lost for good:
//     pods with no controller (Force) and pods with emptyDir data
//     (DeleteEmptyDirData). skiff has no DaemonSets, so
//     --ignore-daemonsets is accepted for kubectl's muscle memory and
//     changes nothing. Pods are deleted, not evicted: there are no
//     PodDisruptionBudgets to respect.

// SetUnschedulable writes the node's spec.unschedulable (cordon: on,
// uncordon: off). changed is false when it already was.
func SetUnschedulable(ctx context.Context, cl client.Interface, name string, on bool) (changed bool, err error) {
	return UpdateNode(ctx, cl, name, func(n *api.Node) bool {
		if n.Spec.Unschedulable == on {
			return false
		}
		n.Spec.Unschedulable = on
		return true
	})
}

// Drainer deletes the pods of a cordoned node, as kubectl's drain.Helper.
type Drainer struct {
	Client client.Interface
	// Force deletes pods that declare no controller (they are lost).
	Force bool
	// DeleteEmptyDirData deletes pods with emptyDir volumes (their data
	// is lost).
	DeleteEmptyDirData bool
	// GracePeriodSeconds each pod is given to terminate; negative: the
	// pod's own terminationGracePeriodSeconds.
	GracePeriodSeconds int64
	// Timeout of the wait for the pods to go; zero waits forever.
	Timeout time.Duration
	// PollInterval between checks of the pods left (default 1 s).
	PollInterval time.Duration
	// Out gets kubectl's progress lines ("evicting pod NS/NAME", "pod/NAME
	// evicted"); ErrOut its warnings.
	Out, ErrOut io.Writer
}

// DeletePods deletes the pods on node and waits until they are gone (or
// replaced by new pods of the same name). It deletes nothing when a pod
// would be lost without Force or DeleteEmptyDirData, and says which.
func (d *Drainer) DeletePods(ctx context.Context, node string) error {
	cl := d.Client
	pods, _, err := client.List[*api.Pod](ctx, cl, "", api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	var doomed []*api.Pod
	var unmanaged, local []string
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		if finished(p) || p.DeletionTimestamp != nil {
			doomed = append(doomed, p) // terminated or already going: no questions
			continue
		}
		if api.ControllerOf(p) == nil {
			unmanaged = append(unmanaged, p.Namespace+"/"+p.Name)
		}
		if hasEmptyDir(p) {
			local = append(local, p.Namespace+"/"+p.Name)
		}
		doomed = append(doomed, p)
	}
	var refusals []string
	if len(unmanaged) > 0 {
		if d.Force {
			fmt.Fprintf(d.ErrOut, "Warning: deleting Pods that declare no controller: %s\n", strings.Join(unmanaged, ", "))
		} else {
			refusals = append(refusals, "cannot delete Pods that declare no controller (use --force to override): "+strings.Join(unmanaged, ", "))
		}
	}
	if len(local) > 0 && !d.DeleteEmptyDirData {
		refusals = append(refusals, "cannot delete Pods with local storage (use --delete-emptydir-data to override): "+strings.Join(local, ", "))
	}
	if len(refusals) > 0 {
		return errors.New("[" + strings.Join(refusals, ", ") + "]")
	}
	opts := api.DeleteOptions{}
	if d.GracePeriodSeconds >= 0 {
		g := d.GracePeriodSeconds
		opts.GracePeriodSeconds = &g
	}
	podKind := api.MustKindOf(&api.Pod{})
	for _, p := range doomed {
		fmt.Fprintf(d.Out, "evicting pod %s/%s\n", p.Namespace, p.Name)
		uid := p.UID
		o := opts
		o.Preconditions = &api.Preconditions{UID: &uid}
		if err := cl.Delete(ctx, podKind, p.Namespace, p.Name, o); err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return d.waitGone(ctx, doomed)
}

// waitGone waits until every pod is deleted (or replaced by a new pod of
// the same name), checking every PollInterval, for at most Timeout.
func (d *Drainer) waitGone(ctx context.Context, pods []*api.Pod) error {
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	poll := d.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	left := pods
	for {
		var still []*api.Pod
		for _, p := range left {
			cur, err := client.Get[*api.Pod](ctx, d.Client, p.Namespace, p.Name)
			switch {
			case api.IsNotFound(err):
				fmt.Fprintf(d.Out, "pod/%s evicted\n", p.Name)
			case err != nil && ctx.Err() == nil:
				return err
			case err == nil && cur.UID != p.UID:
				fmt.Fprintf(d.Out, "pod/%s evicted\n", p.Name)
			default:
				still = append(still, p)
			}
		}
		left = still
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			p := left[0]
			if d.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("error when waiting for pod %q in namespace %q to terminate: global timeout reached: %v", p.Name, p.Namespace, d.Timeout)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func finished(p *api.Pod) bool {
	return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed
}

func hasEmptyDir(p *api.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}
