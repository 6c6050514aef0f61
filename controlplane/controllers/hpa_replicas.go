package controllers

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"skiff.dev/skiff/api"
)

// The HPA's replica calculation, as Kubernetes' replica_calculator.go:
// pure functions of the pods, their metrics and the target, so the table
// tests (hpa_replicas_test.go) run them without a cluster. Values are in
// milli-units (a cpu of 250m is 250, a GPU utilization of 90 is 90000), as
// Kubernetes' metrics clients hand them over.

// podMetric is one pod's value of a metric.
type podMetric struct {
	// Value in milli-units.
	Value int64
	// Timestamp and Window of the sample (resource metrics).
	Timestamp time.Time
	Window    time.Duration
}

// podMetrics are the values by pod name.
type podMetrics map[string]podMetric

// hpaTolerance is Kubernetes' default --horizontal-pod-autoscaler-tolerance.
const hpaTolerance = 0.1

// replicaCalc holds the calculation's settings (Kubernetes' flags).
type replicaCalc struct {
	// tolerance: no change while |ratio - 1| <= tolerance.
	tolerance float64
	// cpuInitializationPeriod: a pod started this recently counts as not
	// ready for cpu unless ready and sampled a full window after becoming
	// ready (--horizontal-pod-autoscaler-cpu-initialization-period, 5m).
	cpuInitializationPeriod time.Duration
	// delayOfInitialReadinessStatus: a not-ready pod that turned not ready
	// within this of its start has never been ready (30s).
	delayOfInitialReadinessStatus time.Duration
	now                           func() time.Time
}

func defaultReplicaCalc() replicaCalc {
	return replicaCalc{tolerance: hpaTolerance, cpuInitializationPeriod: 5 * time.Minute, delayOfInitialReadinessStatus: 30 * time.Second, now: time.Now}
}

// calcTrace is what one metric's calculation saw and decided: the inputs
// `describe hpa` and `trace` show.
type calcTrace struct {
	// PerPod values used (after missing/not-ready substitution), by pod.
	PerPod map[string]int64
	// Ready, Unready, Missing, Ignored pod counts.
	Ready, Unready, Missing, Ignored int
	// Ratio of the metric to its target (before substitution) and after.
	Ratio, NewRatio float64
	// WithinTolerance: |ratio-1| <= tolerance, so no change.
	WithinTolerance bool
	// Tolerance the ratio was tested against (0: not tested).
	Tolerance float64
	// Proposal is the replica count this metric proposes.
	Proposal int32
	// Measured: each counted pod's own value (milli-units), before
	// missing and not-ready pods get stand-ins; Shown: the same in the
	// target's unit (percent of request for a utilization target), for
	// the dashboard's plot.
	Measured map[string]int64
	Shown    map[string]float64
}

func (t calcTrace) String() string {
	var b strings.Builder
	names := make([]string, 0, len(t.PerPod))
	for n := range t.PerPod {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", n, milliString(t.PerPod[n]))
	}
	s := fmt.Sprintf("ratio %.3f", t.Ratio)
	if t.NewRatio != 0 && t.NewRatio != t.Ratio {
		s += fmt.Sprintf(" (%.3f with missing/not-ready pods counted)", t.NewRatio)
	}
	r := t.Ratio
	if t.NewRatio != 0 {
		r = t.NewRatio
	}
	switch {
	case t.WithinTolerance:
		s += fmt.Sprintf(" within tolerance (|1 - %.3f| = %.3f <= %g)", r, math.Abs(1-r), t.Tolerance)
	case t.Tolerance > 0:
		s += fmt.Sprintf(" outside tolerance (|1 - %.3f| = %.3f > %g)", r, math.Abs(1-r), t.Tolerance)
		if t.NewRatio != 0 && ((t.Ratio < 1 && t.NewRatio > 1) || (t.Ratio > 1 && t.NewRatio < 1)) {
			s += " but the direction turned: no change"
		}
	}
	s += fmt.Sprintf(" -> %d", t.Proposal)
	if b.Len() > 0 {
		s = "pods " + b.String() + "; " + s
	}
	if t.Unready+t.Missing+t.Ignored > 0 {
		s += fmt.Sprintf(" (ready %d, not ready %d, missing %d, ignored %d)", t.Ready, t.Unready, t.Missing, t.Ignored)
	}
	return s
}

// milliString prints a milli-unit value as a quantity would ("90", "250m").
func milliString(v int64) string {
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return fmt.Sprintf("%dm", v)
}

var (
	errNoPods      = errors.New("no pods returned by selector while calculating replica count")
	errNoPodMetric = errors.New("did not receive metrics for targeted pods (pods might be unready)")
)

// podGroups is Kubernetes' groupPods: pods counted ready, not ready
// (pending; for cpu also not yet ready or sampled before becoming ready),
// missing a metric, or ignored (deleting or failed).
type podGroups struct {
	ready                     int
	unready, missing, ignored map[string]bool
}

func (c replicaCalc) groupPods(pods []*api.Pod, metrics podMetrics, cpu bool) podGroups {
	g := podGroups{unready: map[string]bool{}, missing: map[string]bool{}, ignored: map[string]bool{}}
	now := c.now()
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == api.PodFailed {
			g.ignored[p.Name] = true
			continue
		}
		if p.Status.Phase == api.PodPending {
			g.unready[p.Name] = true
			continue
		}
		m, ok := metrics[p.Name]
		if !ok {
			g.missing[p.Name] = true
			continue
		}
		if cpu && c.cpuUnready(p, m, now) {
			g.unready[p.Name] = true
			continue
		}
		g.ready++
	}
	return g
}

// cpuUnready is the cpu readiness rule of groupPods.
func (c replicaCalc) cpuUnready(p *api.Pod, m podMetric, now time.Time) bool {
	var ready *api.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == api.PodReady {
			ready = &p.Status.Conditions[i]
		}
	}
	if ready == nil || p.Status.StartTime == nil {
		return true
	}
	start, changed := p.Status.StartTime.Time, ready.LastTransitionTime.Time
	if start.Add(c.cpuInitializationPeriod).After(now) {
		return ready.Status == api.ConditionFalse || m.Timestamp.Before(changed.Add(m.Window))
	}
	return ready.Status == api.ConditionFalse && start.Add(c.delayOfInitialReadinessStatus).After(changed)
}

// resourceUtilizationRatio is Kubernetes' GetResourceUtilizationRatio: the
// pods' usage in percent of their requests (pods without a request do not
// count), against the target percent; it also returns the utilization and
// the raw average.
func resourceUtilizationRatio(m podMetrics, requests map[string]int64, target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var total, reqTotal, n int64
	for pod, v := range m {
		r, ok := requests[pod]
		if !ok {
			continue
		}
		total = satAdd(total, v.Value)
		reqTotal = satAdd(reqTotal, r)
		n++
	}
	if reqTotal == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32(min(float64(total)*100/float64(reqTotal), math.MaxInt32))
	return float64(utilization) / float64(target), utilization, total / n, nil
}

// metricUsageRatio is Kubernetes' GetMetricUsageRatio: the average against
// the target average.
func metricUsageRatio(m podMetrics, target int64) (float64, int64) {
	var total int64
	for _, v := range m {
		total = satAdd(total, v.Value)
	}
	avg := total / int64(len(m))
	return float64(avg) / float64(target), avg
}

// podReplicas is the common body of GetResourceReplicas and
// calcPlainMetricReplicas: the ratio over the ready pods; within the
// tolerance no change; with missing pods (at the target, or 100% of their
// request for utilization, on a scale down; at 0 on a scale up) and, on a
// scale up, not-ready pods at 0, the ratio again, and no change if that
// turns the direction or falls within the tolerance.
func (c replicaCalc) podReplicas(current int32, pods []*api.Pod, metrics podMetrics, cpu bool,
	ratio func(podMetrics) (float64, error), fallback func(pod string) int64) (int32, calcTrace, error) {
	tr := calcTrace{Tolerance: c.tolerance}
	if len(pods) == 0 {
		return 0, tr, errNoPods
	}
	g := c.groupPods(pods, metrics, cpu)
	tr.Ready, tr.Unready, tr.Missing, tr.Ignored = g.ready, len(g.unready), len(g.missing), len(g.ignored)
	m := podMetrics{}
	for pod, v := range metrics {
		if !g.ignored[pod] && !g.unready[pod] { // a metric of no listed pod stays, as upstream's
			m[pod] = v
		}
	}
	if len(m) == 0 {
		return 0, tr, errNoPodMetric
	}
	tr.Measured = values(m)
	r, err := ratio(m)
	if err != nil {
		return 0, tr, err
	}
	tr.Ratio = r
	scaleUpWithUnready := len(g.unready) > 0 && r > 1.0
	if !scaleUpWithUnready && len(g.missing) == 0 {
		tr.PerPod = values(m)
		if math.Abs(1.0-r) <= c.tolerance {
			tr.WithinTolerance, tr.Proposal = true, current
			return current, tr, nil
		}
		tr.Proposal = ceilReplicas(r * float64(g.ready))
		return tr.Proposal, tr, nil
	}
	for pod := range g.missing {
		switch {
		case r < 1.0:
			m[pod] = podMetric{Value: fallback(pod)}
		case r > 1.0:
			m[pod] = podMetric{Value: 0}
		}
	}
	if scaleUpWithUnready {
		for pod := range g.unready {
			m[pod] = podMetric{Value: 0}
		}
	}
	tr.PerPod = values(m)
	nr, err := ratio(m)
	if err != nil {
		return 0, tr, err
	}
	tr.NewRatio = nr
	if math.Abs(1.0-nr) <= c.tolerance || (r < 1.0 && nr > 1.0) || (r > 1.0 && nr < 1.0) {
		tr.WithinTolerance, tr.Proposal = math.Abs(1.0-nr) <= c.tolerance, current
		return current, tr, nil
	}
	n := ceilReplicas(nr * float64(len(m)))
	if (nr < 1.0 && n > current) || (nr > 1.0 && n < current) {
		tr.Proposal = current
		return current, tr, nil
	}
	tr.Proposal = n
	return n, tr, nil
}

func values(m podMetrics) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Value
	}
	return out
}

// resourceReplicas is GetResourceReplicas (Utilization target, percent):
// it returns the proposal, the utilization and the raw average.
func (c replicaCalc) resourceReplicas(current int32, target int32, resource, container string, pods []*api.Pod, metrics podMetrics) (int32, int32, int64, calcTrace, error) {
	requests, err := podRequests(pods, resource, container)
	if err != nil {
		return 0, 0, 0, calcTrace{}, err
	}
	var utilization int32
	var raw int64
	first := true
	ratio := func(m podMetrics) (float64, error) {
		r, u, a, err := resourceUtilizationRatio(m, requests, target)
		if first { // the reported values are those of the ready pods
			utilization, raw, first = u, a, false
		}
		return r, err
	}
	fallback := func(pod string) int64 { return requests[pod] * int64(max(100, target)) / 100 }
	n, tr, err := c.podReplicas(current, pods, metrics, resource == "cpu", ratio, fallback)
	tr.Shown = make(map[string]float64, len(tr.Measured))
	for pod, v := range tr.Measured {
		if req := requests[pod]; req > 0 {
			tr.Shown[pod] = float64(v) * 100 / float64(req)
		}
	}
	return n, utilization, raw, tr, err
}

// plainReplicas is calcPlainMetricReplicas (an AverageValue target of a
// resource or pods metric): it returns the proposal and the average.
func (c replicaCalc) plainReplicas(current int32, target int64, cpu bool, pods []*api.Pod, metrics podMetrics) (int32, int64, calcTrace, error) {
	var avg int64
	first := true
	ratio := func(m podMetrics) (float64, error) {
		r, a := metricUsageRatio(m, target)
		if first {
			avg, first = a, false
		}
		return r, nil
	}
	n, tr, err := c.podReplicas(current, pods, metrics, cpu, ratio, func(string) int64 { return target })
	tr.Shown = make(map[string]float64, len(tr.Measured))
	for pod, v := range tr.Measured {
		tr.Shown[pod] = float64(v) / 1000
	}
	return n, avg, tr, err
}

// podRequests is calculatePodRequests: each pod's request of resource
// (one container's, or the sum of its containers'), milli-units.
func podRequests(pods []*api.Pod, resource, container string) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, p := range pods {
		var sum int64
		for _, ctr := range p.Spec.Containers {
			if container != "" && ctr.Name != container {
				continue
			}
			q, ok := ctr.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ctr.Name, p.Name)
			}
			sum += q.MilliValue()
		}
		out[p.Name] = sum
	}
	return out, nil
}

// readyPodCount is getReadyPodsCount: running and ready pods.
func readyPodCount(pods []*api.Pod) (int64, error) {
	if len(pods) == 0 {
		return 0, errNoPods
	}
	var n int64
	for _, p := range pods {
		if p.Status.Phase == api.PodRunning && podReady(p) {
			n++
		}
	}
	return n, nil
}

func podReady(p *api.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// usageRatioReplicas is getUsageRatioReplicaCount (Object and External
// Value targets): ceil(ratio × ready pods), or ceil(ratio) from zero.
func (c replicaCalc) usageRatioReplicas(current int32, ratio float64, pods []*api.Pod) (int32, calcTrace, error) {
	tr := calcTrace{Ratio: ratio}
	if current == 0 {
		tr.Proposal = ceilReplicas(ratio)
		return tr.Proposal, tr, nil
	}
	tr.Tolerance = c.tolerance
	if math.Abs(1.0-ratio) <= c.tolerance {
		tr.WithinTolerance, tr.Proposal = true, current
		return current, tr, nil
	}
	ready, err := readyPodCount(pods)
	if err != nil {
		return 0, tr, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	tr.Ready = int(ready)
	tr.Proposal = ceilReplicas(ratio * float64(ready))
	return tr.Proposal, tr, nil
}

// perPodReplicas is GetObjectPerPodMetricReplicas and
// GetExternalPerPodMetricReplicas (AverageValue of an object or external
// metric): the total over the target average, from statusReplicas; it
// returns the proposal and the per-pod average reported.
func (c replicaCalc) perPodReplicas(statusReplicas int32, usage, target int64) (int32, int64, calcTrace) {
	n := statusReplicas
	ratio := float64(usage) / (float64(target) * float64(n))
	tr := calcTrace{Ratio: ratio, Tolerance: c.tolerance}
	if math.Abs(1.0-ratio) <= c.tolerance {
		tr.WithinTolerance = true
	} else {
		n = ceilReplicas(float64(usage) / float64(target))
	}
	tr.Proposal = n
	avg := usage
	if statusReplicas > 0 {
		avg = int64(math.Ceil(float64(usage) / float64(statusReplicas)))
	}
	return n, avg, tr
}

// ceilReplicas is ceil(f) as a replica count, at most MaxInt32 (a huge
// metric over a tiny target must not wrap around).
func ceilReplicas(f float64) int32 {
	c := math.Ceil(f)
	switch {
	case math.IsNaN(c) || c < 0:
		return 0
	case c >= math.MaxInt32:
		return math.MaxInt32
	}
	return int32(c)
}

// satAdd adds without overflowing: metric sums saturate at MaxInt64.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}
