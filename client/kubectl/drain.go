package kubectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
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
//   - drain cordons, then evicts the pods on the node (pods/NAME/eviction)
//     so their controllers recreate them elsewhere, and waits until they
//     are gone. An eviction a PodDisruptionBudget refuses (429) is tried
//     again every 5 s, as kubectl does, until the budget allows it or the
//     timeout ends. It refuses, unless told otherwise, pods that would be
//     lost for good: pods with no controller (Force) and pods with
//     emptyDir data (DeleteEmptyDirData); and DaemonSet pods, which their
//     DaemonSet would put back at once on the cordoned node (it tolerates
//     node.kubernetes.io/unschedulable): IgnoreDaemonSets leaves them
//     running.

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
	// IgnoreDaemonSets leaves DaemonSet pods running; without it drain
	// refuses a node that runs one.
	IgnoreDaemonSets bool
	// DisableEviction deletes pods instead of evicting them (no
	// PodDisruptionBudget is asked).
	DisableEviction bool
	// EvictionRetry is how long a refused eviction waits before the next
	// try (kubectl: 5 s).
	EvictionRetry time.Duration
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

// Evicter is what evicts pods: *client.Client (POST pods/NAME/eviction).
// A Drainer whose client has no Evict deletes pods instead.
type Evicter interface {
	Evict(ctx context.Context, namespace, name string, opts api.DeleteOptions) error
}

// DeletePods evicts (or deletes) the pods on node and waits until they
// are gone (or replaced by new pods of the same name). It removes nothing
// when a pod would be lost without Force or DeleteEmptyDirData, or is a
// DaemonSet's without IgnoreDaemonSets, and says which, in kubectl's words.
func (d *Drainer) DeletePods(ctx context.Context, node string) error {
	pods, _, err := client.List[*api.Pod](ctx, d.Client, "", api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	doomed, err := d.filter(ctx, node, pods)
	if err != nil {
		return err
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	var mu sync.Mutex
	say := func(w io.Writer, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format, args...)
	}
	errs := make([]error, len(doomed))
	var wg sync.WaitGroup
	for i, p := range doomed {
		wg.Go(func() { errs[i] = d.remove(ctx, p, say) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if d.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("drain did not complete within %v", d.Timeout)
		}
		return err
	}
	return nil
}

// filter returns the pods to remove, or kubectl's refusal. Each pod goes
// through kubectl's filters in its order (k8s.io/kubectl/pkg/drain
// makeFilters: DaemonSet, local storage, no controller), the first that
// refuses it deciding: the refusals are grouped per reason ("cannot delete
// REASON: NS/NAME, ..."), one alone as it is, several in brackets as
// kubectl's aggregate error says them. A DaemonSet pod left alone
// (IgnoreDaemonSets) and a pod without a controller deleted (Force) are
// warned about on one line, "; " between reasons, as kubectl's; as in
// kubectl, a later filter's pass drops an earlier one's warning (emptyDir
// data, an orphaned DaemonSet pod).
func (d *Drainer) filter(ctx context.Context, node string, pods []*api.Pod) ([]*api.Pod, error) {
	const (
		daemonSetFatal    = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
		daemonSetWarning  = "ignoring DaemonSet-managed Pods"
		localStorageFatal = "Pods with local storage (use --delete-emptydir-data to override)"
		// kubectl 1.32's words, "cannot delete" twice (its constant
		// carries it and the list adds it again; later kubectl drops one).
		unmanagedFatal   = "cannot delete Pods that declare no controller (use --force to override)"
		unmanagedWarning = "deleting Pods that declare no controller"
	)
	var doomed []*api.Pod
	var fatal, warn groups
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		name := p.Namespace + "/" + p.Name
		if finished(p) {
			doomed = append(doomed, p) // every filter passes a finished pod
			continue
		}
		if ref := api.ControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
			_, err := d.Client.Get(ctx, api.MustKindOf(&api.DaemonSet{}), p.Namespace, ref.Name)
			switch {
			case api.IsNotFound(err) && d.Force: // an orphan: removed
			case err != nil:
				fatal.add(err.Error(), name)
				continue
			case d.IgnoreDaemonSets:
				warn.add(daemonSetWarning, name)
				continue
			default:
				fatal.add(daemonSetFatal, name)
				continue
			}
		}
		if hasEmptyDir(p) && !d.DeleteEmptyDirData {
			fatal.add(localStorageFatal, name)
			continue
		}
		if api.ControllerOf(p) == nil {
			if !d.Force {
				fatal.add(unmanagedFatal, name)
				continue
			}
			warn.add(unmanagedWarning, name)
		}
		doomed = append(doomed, p)
	}
	if len(fatal.order) > 0 {
		return nil, &Refusal{Reasons: fatal.lines("cannot delete %s: %s")}
	}
	if len(warn.order) > 0 {
		fmt.Fprintf(d.ErrOut, "Warning: %s\n", strings.Join(warn.lines("%s: %s"), "; "))
	}
	return doomed, nil
}

// Refusal is drain's refusal of a node's pods, one reason per line of
// kubectl's ("cannot delete REASON: NS/NAME, ..."). Its Error is
// kubectl's aggregate: one reason as it is, several in brackets.
type Refusal struct {
	Reasons []string
}

func (r *Refusal) Error() string {
	if len(r.Reasons) == 1 {
		return r.Reasons[0]
	}
	return "[" + strings.Join(r.Reasons, ", ") + "]"
}

// groups collects pod names per reason, in the order reasons first come.
type groups struct {
	order []string
	pods  map[string][]string
}

func (g *groups) add(reason, pod string) {
	if g.pods == nil {
		g.pods = map[string][]string{}
	}
	if _, ok := g.pods[reason]; !ok {
		g.order = append(g.order, reason)
	}
	g.pods[reason] = append(g.pods[reason], pod)
}

// lines formats each reason with its pods, joined by ", ".
func (g *groups) lines(format string) []string {
	out := make([]string, 0, len(g.order))
	for _, r := range g.order {
		out = append(out, fmt.Sprintf(format, r, strings.Join(g.pods[r], ", ")))
	}
	return out
}

// remove evicts (or deletes) one pod, trying a refused eviction again
// every EvictionRetry, then waits until the pod is gone.
func (d *Drainer) remove(ctx context.Context, p *api.Pod, say func(io.Writer, string, ...any)) error {
	opts := api.DeleteOptions{}
	if d.GracePeriodSeconds >= 0 {
		g := d.GracePeriodSeconds
		opts.GracePeriodSeconds = &g
	}
	uid := p.UID
	opts.Preconditions = &api.Preconditions{UID: &uid}
	retry := d.EvictionRetry
	if retry <= 0 {
		retry = 5 * time.Second
	}
	ev, evict := d.Client.(Evicter)
	evict = evict && !d.DisableEviction
	say(d.Out, "evicting pod %s/%s\n", p.Namespace, p.Name)
	for {
		var err error
		if evict {
			err = ev.Evict(ctx, p.Namespace, p.Name, opts)
		} else {
			err = d.Client.Delete(ctx, api.MustKindOf(&api.Pod{}), p.Namespace, p.Name, opts)
		}
		switch {
		case err == nil, api.IsNotFound(err), api.IsConflict(err): // Conflict: the name is a new pod's; ours is gone
			return d.waitGone(ctx, p, say)
		case evict && api.ReasonOf(err) == api.ReasonTooManyRequests:
			say(d.ErrOut, "error when evicting pods/%q -n %q (will retry after %s): %v\n", p.Name, p.Namespace, retry, err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(retry):
			}
		case evict:
			return fmt.Errorf("error when evicting pods/%q -n %q: %w", p.Name, p.Namespace, err)
		default:
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
}

// waitGone waits until the pod is deleted (or replaced by a new pod of
// the same name), checking every PollInterval.
func (d *Drainer) waitGone(ctx context.Context, p *api.Pod, say func(io.Writer, string, ...any)) error {
	poll := d.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		cur, err := client.Get[*api.Pod](ctx, d.Client, p.Namespace, p.Name)
		switch {
		case api.IsNotFound(err), err == nil && cur.UID != p.UID:
			say(d.Out, "pod/%s evicted\n", p.Name)
			return nil
		case err != nil && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
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
