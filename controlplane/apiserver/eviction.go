package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
)

// serveEviction is POST pods/NAME/eviction (policy/v1 Eviction), what
// `kubectl drain` sends for each pod: the pod's graceful delete with the
// Eviction's DeleteOptions, unless its PodDisruptionBudget forbids it, as
// kube-apiserver's EvictionREST:
//
//   - a pod that is Pending, finished or already deleting is deleted
//     without asking any budget;
//   - a pod matched by more than one budget cannot be evicted (500);
//   - with one budget: an unready pod goes when the policy is AlwaysAllow,
//     or (IfHealthyBudget, the default) while the budget is met; otherwise
//     the budget must allow a disruption. Allowed: disruptionsAllowed goes
//     down by one and the pod enters status.disruptedPods (the disruption
//     controller does not count it as healthy until it is gone), written
//     with the budget's resourceVersion so two evictions never spend the
//     same disruption. Refused: 429 TooManyRequests "Cannot evict pod as
//     it would violate the pod's disruption budget.", with the budget's
//     numbers as the cause; kubectl drain retries every 5 s;
//   - the pod gets the condition DisruptionTarget (EvictionByEvictionAPI)
//     before it is deleted.
//
// The answer is kube-apiserver's: 201 with a Success Status.
func (s *Server) serveEviction(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	ctx := r.Context()
	var ev api.Eviction
	if err := strictUnmarshal(body, &ev); err != nil {
		writeError(w, api.NewBadRequest("decode Eviction: "+err.Error()))
		return
	}
	if ev.APIVersion != "" && ev.Kind != "" && (ev.Kind != "Eviction" || (ev.APIVersion != "policy/v1" && ev.APIVersion != "policy/v1beta1")) {
		writeError(w, api.NewBadRequest(fmt.Sprintf("the body is a %s %s: send a policy/v1 Eviction", ev.APIVersion, ev.Kind)))
		return
	}
	if ev.Name != info.name {
		// kube-apiserver's words.
		writeError(w, api.NewBadRequest("name in URL does not match name in Eviction object"))
		return
	}
	if ev.Namespace != "" && ev.Namespace != info.namespace {
		writeError(w, api.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ev.Namespace, info.namespace)))
		return
	}
	var opts api.DeleteOptions
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	var err error
	if ctx, err = dryRunOption(ctx, "DeleteOptions", opts.DryRun); err != nil {
		writeError(w, err)
		return
	}
	if err := api.CheckPropagationPolicy(opts.PropagationPolicy); err != nil {
		writeError(w, err)
		return
	}
	if err := s.evict(ctx, info.namespace, info.name, opts); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Status{
		TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Success", Code: http.StatusCreated,
	})
}

// evictionRetries bounds the conflict retries on the budget's status
// (Kubernetes' EvictionsRetry).
const evictionRetries = 5

// maxDisruptedPods bounds status.disruptedPods (Kubernetes'
// MaxDisruptedPodSize).
const maxDisruptedPods = 2000

// evict checks the pod's budget, spends a disruption, marks the pod and
// deletes it.
func (s *Server) evict(ctx context.Context, ns, name string, opts api.DeleteOptions) error {
	o, err := s.reg.Get(ctx, podKind, ns, name)
	if err != nil {
		return err
	}
	pod := o.(*api.Pod)
	if !canIgnorePDB(pod) {
		if err := s.spendDisruption(ctx, pod); err != nil {
			return err
		}
	}
	if !isDryRun(ctx) {
		s.markDisruptionTarget(ctx, pod)
	}
	_, _, err = s.reg.Delete(ctx, podKind, ns, name, opts)
	return err
}

// canIgnorePDB: a pod that is not running (Pending, finished) or already
// going is deleted whatever the budgets say.
func canIgnorePDB(p *api.Pod) bool {
	return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed || p.Status.Phase == api.PodPending || p.DeletionTimestamp != nil
}

// spendDisruption finds the pod's budget and takes one disruption from
// it, or refuses.
func (s *Server) spendDisruption(ctx context.Context, pod *api.Pod) error {
	var lastErr error
	for range evictionRetries {
		pdb, err := s.podBudget(ctx, pod)
		if err != nil || pdb == nil {
			return err
		}
		if !podReady(pod) {
			if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == api.AlwaysAllow {
				return nil
			}
			if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
				return nil
			}
		}
		lastErr = s.checkAndDecrement(ctx, pdb, pod.Name)
		if !api.IsConflict(lastErr) {
			return lastErr
		}
	}
	return lastErr
}

// podBudget is the one budget whose selector matches the pod (nil: none).
func (s *Server) podBudget(ctx context.Context, pod *api.Pod) (*api.PodDisruptionBudget, error) {
	if len(pod.Labels) == 0 {
		return nil, nil
	}
	objs, _, err := s.reg.List(ctx, pdbKind, pod.Namespace, api.ListOptions{})
	if err != nil {
		return nil, err
	}
	var found []*api.PodDisruptionBudget
	for _, o := range objs {
		pdb := o.(*api.PodDisruptionBudget)
		sel, err := pdb.Spec.Selector.AsSelector()
		if err == nil && sel.Matches(labels.Set(pod.Labels)) {
			found = append(found, pdb)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	//lint:ignore ST1005 kube-apiserver's words, word for word
	return nil, api.NewInternal(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
}

// checkAndDecrement is kube-apiserver's: refuse, or spend one disruption
// and note the pod, writing the budget's status at the resourceVersion
// read (a Conflict makes the caller read it again).
func (s *Server) checkAndDecrement(ctx context.Context, pdb *api.PodDisruptionBudget, podName string) error {
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return evictionRefused(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	case pdb.Status.DisruptionsAllowed < 0:
		return forbidden(pdbKind, pdb.Name, "pdb disruptions allowed is negative")
	case len(pdb.Status.DisruptedPods) > maxDisruptedPods:
		return forbidden(pdbKind, pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
	case pdb.Status.DisruptionsAllowed == 0:
		return evictionRefused(api.DisruptionDeniedMessage(pdb))
	}
	u := api.Clone(pdb)
	u.Status.DisruptionsAllowed--
	now := time.Now()
	if u.Status.DisruptionsAllowed == 0 {
		api.SetDisruptionAllowedCondition(&u.Status, now)
	}
	if isDryRun(ctx) {
		return nil
	}
	if u.Status.DisruptedPods == nil {
		u.Status.DisruptedPods = map[string]api.Time{}
	}
	u.Status.DisruptedPods[podName] = api.NewTime(now)
	_, err := s.reg.UpdateStatus(ctx, pdbKind, u)
	return err
}

// evictionRefused is the 429 of a refused eviction, the budget's words as
// its cause.
func evictionRefused(cause string) error {
	e := api.NewStatusError(http.StatusTooManyRequests, api.ReasonTooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget.")
	e.Status.Details = &api.StatusDetails{Causes: []api.StatusCause{{Type: api.DisruptionBudgetCause, Message: cause}}}
	return e
}

// markDisruptionTarget sets the pod condition DisruptionTarget, as
// kube-apiserver does before an eviction's delete (a Job's
// podFailurePolicy can tell an evicted pod by it). A failure only loses
// the condition.
func (s *Server) markDisruptionTarget(ctx context.Context, pod *api.Pod) {
	u := api.Clone(pod)
	strategy.SetPodCondition(u, api.PodCondition{Type: api.PodDisruptionTarget, Status: api.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: api.Now()})
	if _, err := s.reg.UpdateStatus(ctx, podKind, u); err != nil {
		s.log.Debug("eviction: set DisruptionTarget", "pod", api.KeyOf(pod), "err", err)
	}
}

func podReady(p *api.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}
