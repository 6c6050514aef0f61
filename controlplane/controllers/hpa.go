package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The HorizontalPodAutoscaler controller, as Kubernetes' horizontal.go.
// Every sync period (15 s, --hpa-sync-period) each autoscaler:
//
//  1. reads its target's scale subresource (AbleToScale False
//     FailedGetScale when it cannot) and the pods of the scale's selector;
//  2. outside minReplicas..maxReplicas the count is brought inside; a
//     target at 0 replicas is not scaled (ScalingActive False
//     ScalingDisabled);
//  3. otherwise each metric proposes a count (hpa_replicas.go: ceil(current
//     × metric/target), nothing within the 0.1 tolerance, missing and
//     not-ready pods as Kubernetes counts them) and the largest proposal
//     wins; if every metric failed, or some failed and the rest would
//     scale down, nothing changes (ScalingActive False with the first
//     failure's reason);
//  4. the proposal is stabilized and rate-limited (hpa_behavior.go:
//     spec.behavior, or without one the downscale window and the legacy
//     max(2×current, 4)), bounded by min and max (ScalingLimited);
//  5. a new count is written through the scale subresource
//     (SuccessfulRescale "New size: N; reason: ..."), and the status
//     (currentReplicas, desiredReplicas, currentMetrics, conditions,
//     lastScaleTime) is written when it changed.
//
// Recommendations and scale events are in memory, per autoscaler, as in
// kube-controller-manager. The last decisions, with their inputs, are kept
// (Decisions) and posted after each sync as a span of the autoscaler's
// trace (api/trace_hpa.go), which the API server keeps in memory, never
// in the store: `skiff describe hpa`, `skiff trace hpa/NAME` and the
// dashboard read them there, as the scheduler's explanations of a pod.
type HPAController struct {
	client  client.Interface
	hpas    Lister // *api.HorizontalPodAutoscaler
	pods    Lister // *api.Pod
	metrics MetricsSource
	events  EventRecorder
	log     *slog.Logger
	cfg     HPAConfig
	calc    replicaCalc

	mu    sync.Mutex
	state map[string]*hpaState
}

// HPAConfig are the controller's settings, kube-controller-manager's
// --horizontal-pod-autoscaler-* flags.
type HPAConfig struct {
	// SyncPeriod between two reconciles of one autoscaler (15 s).
	SyncPeriod time.Duration
	// DownscaleStabilization: the window of a scale down without a
	// behavior window (5 m).
	DownscaleStabilization time.Duration
	// Tolerance: no change while |ratio - 1| <= it (0.1).
	Tolerance float64
	// CPUInitializationPeriod (5 m) and InitialReadinessDelay (30 s): the
	// readiness rules of cpu samples.
	CPUInitializationPeriod, InitialReadinessDelay time.Duration
}

// DefaultHPAConfig is Kubernetes' defaults.
func DefaultHPAConfig() HPAConfig {
	return HPAConfig{SyncPeriod: 15 * time.Second, DownscaleStabilization: 5 * time.Minute, Tolerance: hpaTolerance,
		CPUInitializationPeriod: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second}
}

const (
	hpaControllerName = "horizontal-pod-autoscaler"
	maxHPADecisions   = 10
)

func hpaKind() *api.Kind { return api.MustKindOf(&api.HorizontalPodAutoscaler{}) }

// NewHPAController returns the controller; zero fields of cfg take
// DefaultHPAConfig's.
func NewHPAController(c client.Interface, hpas, pods Lister, metrics MetricsSource, events EventRecorder, cfg HPAConfig, log *slog.Logger) *HPAController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexLabels(pods) // the selector's pods: ListBy
	if events == nil {
		events = nopRecorder{}
	}
	def := DefaultHPAConfig()
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = def.SyncPeriod
	}
	if cfg.DownscaleStabilization < 0 {
		cfg.DownscaleStabilization = def.DownscaleStabilization
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = def.Tolerance
	}
	if cfg.CPUInitializationPeriod <= 0 {
		cfg.CPUInitializationPeriod = def.CPUInitializationPeriod
	}
	if cfg.InitialReadinessDelay <= 0 {
		cfg.InitialReadinessDelay = def.InitialReadinessDelay
	}
	calc := replicaCalc{tolerance: cfg.Tolerance, cpuInitializationPeriod: cfg.CPUInitializationPeriod,
		delayOfInitialReadinessStatus: cfg.InitialReadinessDelay, now: time.Now}
	return &HPAController{client: c, hpas: hpas, pods: pods, metrics: metrics, events: events, cfg: cfg, calc: calc,
		log: log.With("controller", hpaControllerName), state: map[string]*hpaState{}}
}

// Decisions returns the last decisions about namespace/name, oldest first.
func (r *HPAController) Decisions(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.state[key]; s != nil {
		return append([]string(nil), s.decisions...)
	}
	return nil
}

// hpaSync is what one reconcile of one autoscaler knows.
type hpaSync struct {
	hpa   *api.HorizontalPodAutoscaler // a copy: its status is written
	key   string
	st    *hpaState
	now   time.Time
	scale *api.Scale
	kind  *api.Kind
	// trace of this decision (describe hpa's "Decisions").
	trace []string
	// samples: what each metric read (the dashboard's plot).
	samples []api.HPAMetricSample
	// rescaled: the sync wrote a new count.
	rescaled bool
	// decided: the sync came to a count (its metrics, or the bounds,
	// gave one); a sync that failed before leaves the status's desired
	// count as it was, which is no decision of this sync.
	decided bool
}

// Reconcile syncs one autoscaler at most once per sync period (its own
// status write comes back as a watch event) and asks to come back after
// the period. It implements client.Reconciler.
func (r *HPAController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	cached, ok := getAs[*api.HorizontalPodAutoscaler](r.hpas, ns, name)
	r.mu.Lock()
	if !ok {
		delete(r.state, key)
		r.mu.Unlock()
		return nil
	}
	st := r.state[key]
	if st == nil {
		st = &hpaState{}
		r.state[key] = st
	}
	now := r.calc.now()
	if since := now.Sub(st.lastSync); !st.lastSync.IsZero() && since < r.cfg.SyncPeriod && st.generation == cached.Generation {
		r.mu.Unlock()
		return client.RequeueAfter(r.cfg.SyncPeriod - since)
	}
	st.lastSync, st.generation = now, cached.Generation
	r.mu.Unlock()

	s := &hpaSync{hpa: api.Clone(cached), key: key, st: st, now: now}
	err := r.reconcile(ctx, s)
	r.mu.Lock()
	st.decisions = append(st.decisions, now.UTC().Format(time.RFC3339)+" "+strings.Join(s.trace, "; "))
	if len(st.decisions) > maxHPADecisions {
		st.decisions = st.decisions[len(st.decisions)-maxHPADecisions:]
	}
	r.mu.Unlock()
	r.publish(ctx, s)
	var statusErr error
	if !reflect.DeepEqual(cached.Status, s.hpa.Status) {
		if _, statusErr = r.client.UpdateStatus(ctx, s.hpa); statusErr != nil && !api.IsNotFound(statusErr) {
			statusErr = fmt.Errorf("hpa %s: update status: %w", key, statusErr)
		} else {
			statusErr = nil
		}
	}
	logReconcile(r.log, s.scale != nil && s.hpa.Status.DesiredReplicas != s.scale.Spec.Replicas, key,
		fmt.Sprintf("%d replicas", s.hpa.Status.CurrentReplicas), fmt.Sprint(s.hpa.Status.DesiredReplicas), strings.Join(s.trace, "; "))
	if err := errors.Join(err, statusErr); err != nil {
		if api.IsConflict(err) {
			return requeueOnConflict(r.log, "hpa "+key, err)
		}
		r.log.Info("hpa sync failed", "key", key, "err", err)
	}
	return client.RequeueAfter(r.cfg.SyncPeriod)
}

// publish posts the decision of s to the autoscaler's trace, when the
// client keeps traces (the API server's Local in the leader, the HTTP
// client, the fake). A failure is logged: the decision stands.
func (r *HPAController) publish(ctx context.Context, s *hpaSync) {
	t, ok := r.client.(client.ObjectTracer)
	if !ok {
		return
	}
	desired := s.hpa.Status.DesiredReplicas
	if !s.decided {
		desired = s.hpa.Status.CurrentReplicas // the count stays
	}
	span := api.NewHPADecisionSpan(s.now, r.calc.now(), s.hpa.Status.CurrentReplicas, desired, s.trace, s.samples...)
	if s.rescaled {
		span.Details["rescaled"] = true
	}
	if err := t.AddObjectTrace(ctx, hpaKind(), s.hpa.Namespace, s.hpa.Name, span); err != nil && !api.IsNotFound(err) {
		r.log.Debug("post hpa decision", "key", s.key, "err", err)
	}
}

// setCondition is Kubernetes' setCondition: the transition time moves only
// when the status does.
func setHPACondition(h *api.HorizontalPodAutoscaler, now time.Time, typ, status, reason, message string) {
	for i := range h.Status.Conditions {
		c := &h.Status.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = api.Time{Time: now.Truncate(time.Second)}
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	h.Status.Conditions = append(h.Status.Conditions, api.HorizontalPodAutoscalerCondition{
		Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: api.Time{Time: now.Truncate(time.Second)}})
}

func (s *hpaSync) set(typ, status, reason, message string) {
	setHPACondition(s.hpa, s.now, typ, status, reason, message)
}

// reconcile is reconcileAutoscaler.
func (r *HPAController) reconcile(ctx context.Context, s *hpaSync) error {
	h := s.hpa
	ref := h.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, h.Namespace, ref.Name)
	if err := r.getScale(ctx, s); err != nil {
		r.events.Eventf(ctx, h, api.EventWarning, "FailedGetScale", "%s", err)
		s.set(api.AbleToScale, api.ConditionFalse, "FailedGetScale", fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v", err))
		s.trace = append(s.trace, "failed to get the scale: "+err.Error())
		return fmt.Errorf("failed to query scale subresource for %s: %v", reference, err)
	}
	s.set(api.AbleToScale, api.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := s.scale.Spec.Replicas
	r.mu.Lock()
	if s.st.recommendations == nil { // recordInitialRecommendation
		s.st.recommendations = []timedRecommendation{{current, s.now}}
	}
	r.mu.Unlock()
	minR := int32(1)
	if h.Spec.MinReplicas != nil {
		minR = *h.Spec.MinReplicas
	}
	s.trace = append(s.trace, fmt.Sprintf("current %d (min %d, max %d)", current, minR, h.Spec.MaxReplicas))
	var statuses []api.MetricStatus
	var desired int32
	reason := ""
	rescale := true
	var retErr error
	switch {
	case current == 0 && minR != 0:
		desired, rescale = 0, false
		s.set(api.ScalingActive, api.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		s.trace = append(s.trace, "scaling disabled (target at 0)")
	case current > h.Spec.MaxReplicas:
		reason, desired = "Current number of replicas above Spec.MaxReplicas", h.Spec.MaxReplicas
	case current < minR:
		reason, desired = "Current number of replicas below Spec.MinReplicas", minR
	default:
		proposal, metric, sts, err := r.computeReplicasForMetrics(ctx, s)
		statuses = sts
		if err != nil && proposal == -1 {
			r.setStatus(s, current, h.Status.DesiredReplicas, statuses, false)
			r.events.Eventf(ctx, h, api.EventWarning, "FailedComputeMetricsReplicas", "%s", err)
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %v", reference, err)
		}
		retErr = err
		desired, reason = r.decide(s, current, minR, proposal, metric)
		rescale = desired != current
	}
	if rescale {
		if err := r.rescale(ctx, s, current, desired, reason); err != nil {
			r.setStatus(s, current, h.Status.DesiredReplicas, statuses, false)
			return fmt.Errorf("failed to rescale %s: %v", reference, err)
		}
	} else {
		desired = current
	}
	r.setStatus(s, current, desired, statuses, rescale)
	s.decided = true
	return retErr
}

// decide turns the largest proposal into the new count (the reason of a
// rescale, then normalization with or without a behavior).
func (r *HPAController) decide(s *hpaSync, current, minR, proposal int32, metric string) (int32, string) {
	h := s.hpa
	var desired int32
	rescaleMetric, reason := "", ""
	if proposal > desired {
		desired, rescaleMetric = proposal, metric
	}
	if desired > current {
		reason = fmt.Sprintf("%s above target", rescaleMetric)
	}
	if desired < current {
		reason = "All metrics below target"
	}
	a := normalization{up: api.DefaultHPAScaleUpRules(), down: api.DefaultHPAScaleDownRules(), min: minR, max: h.Spec.MaxReplicas,
		current: current, desired: desired, now: s.now, downscaleStabilWindow: r.cfg.DownscaleStabilization}
	var n int32
	var conds []hpaCond
	r.mu.Lock()
	if b := h.Spec.Behavior; b == nil {
		n, conds = s.st.normalizeLegacy(a)
	} else {
		if b.ScaleUp != nil {
			a.up = b.ScaleUp
		}
		if b.ScaleDown != nil {
			a.down = b.ScaleDown
		}
		n, conds = s.st.normalizeWithBehavior(a)
	}
	r.mu.Unlock()
	for _, c := range conds {
		s.set(c.typ, c.status, c.reason, c.message)
		if c.reason != "ReadyForNewScale" && c.reason != "DesiredWithinRange" {
			s.trace = append(s.trace, c.reason+": "+c.message)
		}
	}
	s.trace = append(s.trace, fmt.Sprintf("proposal %d -> %d", desired, n))
	return n, reason
}

// rescale writes the new count through the scale subresource.
func (r *HPAController) rescale(ctx context.Context, s *hpaSync, current, desired int32, reason string) error {
	h := s.hpa
	sc := api.Clone(s.scale)
	sc.Spec.Replicas = desired
	if _, err := r.client.UpdateScale(ctx, s.kind, h.Namespace, h.Spec.ScaleTargetRef.Name, sc); err != nil {
		r.events.Eventf(ctx, h, api.EventWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
		s.set(api.AbleToScale, api.ConditionFalse, "FailedUpdateScale", fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err))
		s.trace = append(s.trace, "failed to rescale: "+err.Error())
		return err
	}
	s.set(api.AbleToScale, api.ConditionTrue, "SucceededRescale", fmt.Sprintf("the HPA controller was able to update the target scale to %d", desired))
	r.events.Eventf(ctx, h, api.EventNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
	s.trace = append(s.trace, fmt.Sprintf("scaled %d -> %d (%s)", current, desired, reason))
	s.rescaled = true
	r.mu.Lock()
	s.st.storeScaleEvent(h.Spec.Behavior, current, desired, s.now)
	r.mu.Unlock()
	return nil
}

// setStatus is Kubernetes' setStatus.
func (r *HPAController) setStatus(s *hpaSync, current, desired int32, statuses []api.MetricStatus, rescale bool) {
	st := &s.hpa.Status
	st.CurrentReplicas, st.DesiredReplicas, st.CurrentMetrics = current, desired, statuses
	if rescale {
		st.LastScaleTime = &api.Time{Time: s.now.Truncate(time.Second)}
	}
}

// getScale reads the target's scale subresource.
func (r *HPAController) getScale(ctx context.Context, s *hpaSync) error {
	ref := s.hpa.Spec.ScaleTargetRef
	k, err := api.LookupKind(ref.APIVersion, ref.Kind)
	if err != nil {
		return fmt.Errorf("unable to determine resource for scale target reference: %v", err)
	}
	if !k.HasScale {
		return fmt.Errorf("%s has no scale subresource", k.GroupResource())
	}
	sc, err := r.client.GetScale(ctx, k, s.hpa.Namespace, ref.Name)
	if err != nil {
		return err
	}
	s.scale, s.kind = sc, k
	return nil
}

// milliQuantity is a milli-unit value as a quantity ("90", "250m").
func milliQuantity(v int64) *api.Quantity {
	return resource.NewMilliQuantity(v, resource.DecimalSI)
}

func metricSelector(ls *api.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return ls.AsSelector()
}
