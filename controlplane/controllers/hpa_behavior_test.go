package controllers

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// Normalization: the legacy limits, stabilization windows and behavior
// policies, as Kubernetes' horizontal.go (cases after its
// TestNormalizeDesiredReplicas*, TestScalingWithRules and
// TestStabilizeRecommendationWithBehaviors).

func rules(window int32, sel string, pols ...api.HPAScalingPolicy) *api.HPAScalingRules {
	return &api.HPAScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: &sel, Policies: pols}
}

func TestHPALegacyNormalization(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name                  string
		recs                  []timedRecommendation
		current, desired, max int32
		min                   int32
		want                  int32
		ableReason, limReason string
		limited               bool
	}{
		{name: "doubles at most", current: 3, desired: 10, min: 1, max: 20, want: 6, ableReason: "ReadyForNewScale", limReason: "ScaleUpLimit", limited: true},
		{name: "four from one", current: 1, desired: 10, min: 1, max: 20, want: 4, ableReason: "ReadyForNewScale", limReason: "ScaleUpLimit", limited: true},
		{name: "max", current: 8, desired: 25, min: 1, max: 10, want: 10, ableReason: "ReadyForNewScale", limReason: "TooManyReplicas", limited: true},
		{name: "min", current: 3, desired: 1, min: 2, max: 10, want: 2, ableReason: "ReadyForNewScale", limReason: "TooFewReplicas", limited: true},
		{name: "within", current: 3, desired: 5, min: 1, max: 10, want: 5, ableReason: "ReadyForNewScale", limReason: "DesiredWithinRange"},
		{name: "down stabilized by a recent higher recommendation", recs: []timedRecommendation{{5, now.Add(-time.Minute)}}, current: 5, desired: 2, min: 1, max: 10, want: 5,
			ableReason: "ScaleDownStabilized", limReason: "DesiredWithinRange"},
		{name: "down after the window", recs: []timedRecommendation{{5, now.Add(-6 * time.Minute)}}, current: 5, desired: 2, min: 1, max: 10, want: 2,
			ableReason: "ReadyForNewScale", limReason: "DesiredWithinRange"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &hpaState{recommendations: append([]timedRecommendation(nil), tc.recs...)}
			n, conds := s.normalizeLegacy(normalization{min: tc.min, max: tc.max, current: tc.current, desired: tc.desired, now: now, downscaleStabilWindow: 5 * time.Minute})
			if n != tc.want {
				t.Errorf("got %d, want %d", n, tc.want)
			}
			if len(conds) != 2 || conds[0].reason != tc.ableReason || conds[1].reason != tc.limReason || (conds[1].status == api.ConditionTrue) != tc.limited {
				t.Errorf("conditions %+v, want AbleToScale %s, ScalingLimited %s (%v)", conds, tc.ableReason, tc.limReason, tc.limited)
			}
			if last := s.recommendations[len(s.recommendations)-1]; last.replicas != tc.desired || !last.at.Equal(now) {
				t.Errorf("recommendation not recorded: %+v", s.recommendations)
			}
		})
	}
}

func TestHPABehaviorNormalization(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	pods := func(v, p int32) api.HPAScalingPolicy {
		return api.HPAScalingPolicy{Type: api.PodsScalingPolicy, Value: v, PeriodSeconds: p}
	}
	pct := func(v, p int32) api.HPAScalingPolicy {
		return api.HPAScalingPolicy{Type: api.PercentScalingPolicy, Value: v, PeriodSeconds: p}
	}
	defUp, defDown := api.DefaultHPAScaleUpRules(), api.DefaultHPAScaleDownRules()
	cases := []struct {
		name             string
		up, down         *api.HPAScalingRules
		recs             []timedRecommendation
		ups, downs       []scaleEvent
		current, desired int32
		min, max         int32
		want             int32
		able, lim        string
	}{
		{name: "default up: max(4 pods, 100%)", up: defUp, down: defDown, current: 2, desired: 20, min: 1, max: 100, want: 6, able: "ReadyForNewScale", lim: "ScaleUpLimit"},
		{name: "default up from 10: 100%", up: defUp, down: defDown, current: 10, desired: 50, min: 1, max: 100, want: 20, able: "ReadyForNewScale", lim: "ScaleUpLimit"},
		{name: "Min select", up: rules(0, "Min", pods(4, 15), pct(100, 15)), down: defDown, current: 10, desired: 50, min: 1, max: 100, want: 14, able: "ReadyForNewScale", lim: "ScaleUpLimit"},
		{name: "Disabled up", up: rules(0, "Disabled", pods(4, 15)), down: defDown, current: 5, desired: 10, min: 1, max: 100, want: 5, able: "ReadyForNewScale", lim: "ScaleUpLimit"},
		{name: "up to max", up: defUp, down: defDown, current: 5, desired: 10, min: 1, max: 7, want: 7, able: "ReadyForNewScale", lim: "TooManyReplicas"},
		{name: "down one pod per minute", up: defUp, down: rules(0, "Max", pods(1, 60)), current: 5, desired: 2, min: 1, max: 10, want: 4, able: "ReadyForNewScale", lim: "ScaleDownLimit"},
		{name: "down: a pod already removed this minute", up: defUp, down: rules(0, "Max", pods(1, 60)), downs: []scaleEvent{{change: 1, at: now.Add(-30 * time.Second)}},
			current: 5, desired: 2, min: 1, max: 10, want: 5, able: "ReadyForNewScale", lim: "ScaleDownLimit"},
		{name: "down: the event is older than the period", up: defUp, down: rules(0, "Max", pods(1, 60)), downs: []scaleEvent{{change: 1, at: now.Add(-90 * time.Second)}},
			current: 5, desired: 2, min: 1, max: 10, want: 4, able: "ReadyForNewScale", lim: "ScaleDownLimit"},
		{name: "down 50% keeps the floor", up: defUp, down: rules(0, "Max", pct(50, 15)), current: 5, desired: 1, min: 1, max: 10, want: 2, able: "ReadyForNewScale", lim: "ScaleDownLimit"},
		{name: "down to min", up: defUp, down: rules(0, "Max", pct(100, 15)), current: 5, desired: 1, min: 3, max: 10, want: 3, able: "ReadyForNewScale", lim: "TooFewReplicas"},
		{name: "scale-down window keeps the highest", up: defUp, down: rules(60, "Max", pct(100, 15)), recs: []timedRecommendation{{4, now.Add(-30 * time.Second)}},
			current: 5, desired: 1, min: 1, max: 10, want: 4, able: "ScaleDownStabilized", lim: "DesiredWithinRange"},
		{name: "scale-down window passed", up: defUp, down: rules(60, "Max", pct(100, 15)), recs: []timedRecommendation{{4, now.Add(-90 * time.Second)}},
			current: 5, desired: 1, min: 1, max: 10, want: 1, able: "ReadyForNewScale", lim: "DesiredWithinRange"},
		{name: "scale-up window keeps the lowest", up: rules(60, "Max", pct(100, 15)), down: defDown, recs: []timedRecommendation{{3, now.Add(-30 * time.Second)}},
			current: 3, desired: 6, min: 1, max: 10, want: 3, able: "ScaleUpStabilized", lim: "DesiredWithinRange"},
		{name: "no window on the scale-down rule: the controller's", up: defUp, down: defDown, recs: []timedRecommendation{{4, now.Add(-4 * time.Minute)}},
			current: 5, desired: 1, min: 1, max: 10, want: 4, able: "ScaleDownStabilized", lim: "DesiredWithinRange"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &hpaState{recommendations: tc.recs, scaleUps: tc.ups, scaleDowns: tc.downs}
			n, conds := s.normalizeWithBehavior(normalization{up: tc.up, down: tc.down, min: tc.min, max: tc.max, current: tc.current, desired: tc.desired,
				now: now, downscaleStabilWindow: 5 * time.Minute})
			if n != tc.want {
				t.Errorf("got %d, want %d (%+v)", n, tc.want, conds)
			}
			if len(conds) != 2 || conds[0].reason != tc.able || conds[1].reason != tc.lim {
				t.Errorf("conditions %+v, want %s and %s", conds, tc.able, tc.lim)
			}
		})
	}
}

// TestHPAStoreScaleEvent: events count within their policy's period, and
// an outdated one is reused.
func TestHPAStoreScaleEvent(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	b := &api.HorizontalPodAutoscalerBehavior{ScaleUp: api.DefaultHPAScaleUpRules(), ScaleDown: rules(0, "Max", api.HPAScalingPolicy{Type: "Pods", Value: 1, PeriodSeconds: 60})}
	s := &hpaState{}
	s.storeScaleEvent(b, 2, 6, now)
	s.storeScaleEvent(b, 6, 5, now)
	if len(s.scaleUps) != 1 || s.scaleUps[0].change != 4 || len(s.scaleDowns) != 1 || s.scaleDowns[0].change != 1 {
		t.Fatalf("events %+v %+v", s.scaleUps, s.scaleDowns)
	}
	s.storeScaleEvent(b, 5, 4, now.Add(2*time.Minute))
	if len(s.scaleDowns) != 1 || !s.scaleDowns[0].at.Equal(now.Add(2*time.Minute)) {
		t.Errorf("outdated event not reused: %+v", s.scaleDowns)
	}
	if got := changeInPeriod(60, s.scaleUps, now.Add(30*time.Second)); got != 4 {
		t.Errorf("change in period %d, want 4", got)
	}
	s.storeScaleEvent(nil, 1, 2, now)
	if len(s.scaleUps) != 1 {
		t.Error("an event stored without a behavior")
	}
}
