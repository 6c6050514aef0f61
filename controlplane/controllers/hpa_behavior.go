package controllers

import (
	"math"
	"time"

	"skiff.dev/skiff/api"
)

// The HPA's normalization of a desired count, as Kubernetes' horizontal.go:
// stabilization over the recent recommendations, then the rate limits
// (spec.behavior's policies, or without a behavior the legacy
// max(2×current, 4)), then minReplicas..maxReplicas. The state per
// autoscaler (recommendations and scale events) lives in memory, as in
// kube-controller-manager: a restarted controller starts with the current
// count as its only recommendation.

type timedRecommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// hpaState is one autoscaler's memory.
type hpaState struct {
	recommendations      []timedRecommendation
	scaleUps, scaleDowns []scaleEvent
	// lastSync is when the autoscaler was last reconciled and generation
	// the spec it had: a reconcile sooner than the sync period for the same
	// spec (its own status write coming back) waits for the period.
	lastSync   time.Time
	generation int64
	// decisions are the last few decisions, newest last (describe hpa).
	decisions []string
}

// condition is one condition to set: type, status, reason, message.
type hpaCond struct{ typ, status, reason, message string }

// normalization is one normalization's inputs (NormalizationArg).
type normalization struct {
	up, down              *api.HPAScalingRules
	min, max              int32
	current, desired      int32
	now                   time.Time
	downscaleStabilWindow time.Duration
}

const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// stabilize is stabilizeRecommendation (no behavior): the highest
// recommendation of the downscale window; the recommendation is recorded.
func (s *hpaState) stabilize(desired int32, now time.Time, window time.Duration) int32 {
	out := desired
	old := -1
	cutoff := now.Add(-window)
	for i, r := range s.recommendations {
		if r.at.Before(cutoff) {
			old = i
		} else if r.replicas > out {
			out = r.replicas
		}
	}
	s.record(old, desired, now)
	return out
}

func (s *hpaState) record(old int, desired int32, now time.Time) {
	if old >= 0 {
		s.recommendations[old] = timedRecommendation{desired, now}
	} else {
		s.recommendations = append(s.recommendations, timedRecommendation{desired, now})
	}
}

// normalizeLegacy is normalizeDesiredReplicas: the AbleToScale and
// ScalingLimited conditions it sets, and the count.
func (s *hpaState) normalizeLegacy(a normalization) (int32, []hpaCond) {
	stabilized := s.stabilize(a.desired, a.now, a.downscaleStabilWindow)
	var conds []hpaCond
	if stabilized != a.desired {
		conds = append(conds, hpaCond{api.AbleToScale, api.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"})
	} else {
		conds = append(conds, hpaCond{api.AbleToScale, api.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"})
	}
	n, reason, msg := convertWithRules(a.current, stabilized, a.min, a.max)
	return n, append(conds, limited(n != stabilized, reason, msg))
}

func limited(isLimited bool, reason, msg string) hpaCond {
	st := api.ConditionFalse
	if isLimited {
		st = api.ConditionTrue
	}
	return hpaCond{api.ScalingLimited, st, reason, msg}
}

// convertWithRules is convertDesiredReplicasWithRules.
func convertWithRules(current, desired, minR, maxR int32) (int32, string, string) {
	upLimit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
	maxAllowed, reason, msg := maxR, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxR > upLimit {
		maxAllowed, reason, msg = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	if desired < minR {
		return minR, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	}
	if desired > maxAllowed {
		return maxAllowed, reason, msg
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// normalizeWithBehavior is normalizeDesiredReplicasWithBehaviors.
func (s *hpaState) normalizeWithBehavior(a normalization) (int32, []hpaCond) {
	stabilized, reason, msg := s.stabilizeWithBehavior(a)
	var conds []hpaCond
	if stabilized != a.desired {
		conds = append(conds, hpaCond{api.AbleToScale, api.ConditionTrue, reason, msg})
	} else {
		conds = append(conds, hpaCond{api.AbleToScale, api.ConditionTrue, "ReadyForNewScale", "recommended size matches current size"})
	}
	a.desired = stabilized
	n, reason, msg := s.convertWithBehaviorRate(a)
	return n, append(conds, limited(n != stabilized, reason, msg))
}

// window is a rule's stabilization window; a scale-down rule without one
// takes the controller's --horizontal-pod-autoscaler-downscale-
// stabilization (maybeInitScaleDownStabilizationWindow).
func window(r *api.HPAScalingRules, def time.Duration) time.Duration {
	if r == nil || r.StabilizationWindowSeconds == nil {
		return def
	}
	return time.Duration(*r.StabilizationWindowSeconds) * time.Second
}

// stabilizeWithBehavior is stabilizeRecommendationWithBehaviors: the
// recommendation kept between the lowest of the scale-up window and the
// highest of the scale-down window.
func (s *hpaState) stabilizeWithBehavior(a normalization) (int32, string, string) {
	upCutoff := a.now.Add(-window(a.up, 0))
	downCutoff := a.now.Add(-window(a.down, a.downscaleStabilWindow))
	upRec, downRec := a.desired, a.desired
	old := -1
	for i, r := range s.recommendations {
		if r.at.After(upCutoff) {
			upRec = min(r.replicas, upRec)
		}
		if r.at.After(downCutoff) {
			downRec = max(r.replicas, downRec)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old = i
		}
	}
	rec := a.current
	rec = max(rec, upRec)
	rec = min(rec, downRec)
	s.record(old, a.desired, a.now)
	if a.desired >= a.current {
		return rec, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return rec, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// convertWithBehaviorRate is convertDesiredReplicasWithBehaviorRate.
func (s *hpaState) convertWithBehaviorRate(a normalization) (int32, string, string) {
	switch {
	case a.desired > a.current:
		limit := max(scaleUpLimit(a.current, s.scaleUps, s.scaleDowns, a.up, a.now), a.current)
		maxAllowed, reason, msg := a.max, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxAllowed > limit {
			maxAllowed, reason, msg = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if a.desired > maxAllowed {
			return maxAllowed, reason, msg
		}
	case a.desired < a.current:
		limit := min(scaleDownLimit(a.current, s.scaleUps, s.scaleDowns, a.down, a.now), a.current)
		minAllowed, reason, msg := a.min, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minAllowed < limit {
			minAllowed, reason, msg = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if a.desired < minAllowed {
			return minAllowed, reason, msg
		}
	}
	return a.desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changeInPeriod is getReplicasChangePerPeriod.
func changeInPeriod(periodSeconds int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// scaleUpLimit is calculateScaleUpLimitWithScalingRules.
func scaleUpLimit(current int32, ups, downs []scaleEvent, r *api.HPAScalingRules, now time.Time) int32 {
	sel := selectPolicy(r)
	if sel == api.DisabledPolicySelect {
		return current
	}
	result, pick := int32(math.MinInt32), func(a, b int32) int32 { return max(a, b) }
	if sel == api.MinChangePolicySelect {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changeInPeriod(p.PeriodSeconds, ups, now) + changeInPeriod(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case api.PodsScalingPolicy:
			proposed = start + p.Value
		case api.PercentScalingPolicy:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// scaleDownLimit is calculateScaleDownLimitWithBehaviors.
func scaleDownLimit(current int32, ups, downs []scaleEvent, r *api.HPAScalingRules, now time.Time) int32 {
	sel := selectPolicy(r)
	if sel == api.DisabledPolicySelect {
		return current
	}
	result, pick := int32(math.MaxInt32), func(a, b int32) int32 { return min(a, b) }
	if sel == api.MinChangePolicySelect {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changeInPeriod(p.PeriodSeconds, ups, now) + changeInPeriod(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case api.PodsScalingPolicy:
			proposed = start - p.Value
		case api.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

func selectPolicy(r *api.HPAScalingRules) string {
	if r == nil || r.SelectPolicy == nil {
		return api.MaxChangePolicySelect
	}
	return *r.SelectPolicy
}

// storeScaleEvent records a change for the rate limits (behavior only),
// reusing an event older than the longest policy period.
func (s *hpaState) storeScaleEvent(b *api.HorizontalPodAutoscalerBehavior, prev, next int32, now time.Time) {
	if b == nil {
		return
	}
	store := func(events []scaleEvent, r *api.HPAScalingRules, change int32) []scaleEvent {
		var longest int32
		if r != nil {
			for _, p := range r.Policies {
				longest = max(longest, p.PeriodSeconds)
			}
		}
		cutoff := now.Add(-time.Duration(longest) * time.Second)
		for i := range events {
			if events[i].at.Before(cutoff) {
				events[i].outdated = true
			}
		}
		for i := range events {
			if events[i].outdated {
				events[i] = scaleEvent{change: change, at: now}
				return events
			}
		}
		return append(events, scaleEvent{change: change, at: now})
	}
	if next > prev {
		s.scaleUps = store(s.scaleUps, b.ScaleUp, next-prev)
	} else {
		s.scaleDowns = store(s.scaleDowns, b.ScaleDown, prev-next)
	}
}
