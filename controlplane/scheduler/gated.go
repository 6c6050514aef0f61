package scheduler

import (
	"context"
	"time"

	"skiff.dev/skiff/api"
)

// A pod the PreEnqueue gate holds (DynamicResources: `pod "NS/P":
// ResourceClaim not created yet` while its template claim is not made) is
// never tried, so no cycle explains it. As KEP-5501 ("Reflect PreEnqueue
// rejections in Pod status") has kube-scheduler do, its user is told why
// it waits:
//
//	the PodScheduled condition   False, reason NotReadyForScheduling, the gate's message
//	an Event                     Normal NotReadyForScheduling, the same message
//	a trace span                 component "scheduler", step "queue", Details
//	                             "plugin" and "message" (describe pod and
//	                             trace pod show it as the last attempt)
//
// Only once the same message has held for gatedReportAfter: a template
// claim is usually made within milliseconds, and reporting that would be
// noise (the KEP lets DynamicResources skip such transient waits). The
// report is written once per message; when the gate lets the pod through,
// its first cycle replaces the condition (Unschedulable, or bound).

// ReasonNotReadyForScheduling is KEP-5501's PodScheduled reason and Event
// reason for a pod a PreEnqueue plugin holds.
const ReasonNotReadyForScheduling = "NotReadyForScheduling"

// gatedReportAfter: how long a gate's message holds before it is reported.
const gatedReportAfter = time.Second

// reportGated reports the pods the gate has held for gatedReportAfter
// with a message not reported yet. Run calls it each second.
func (s *Scheduler) reportGated(ctx context.Context) {
	for _, g := range s.queue.GatedToReport(gatedReportAfter) {
		pod := g.Pod
		cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: ReasonNotReadyForScheduling, Message: g.Message}
		if err := s.updateStatus(ctx, pod, cond, ""); err != nil && !api.IsNotFound(err) {
			s.log.Error("update pod status", "pod", api.Key(pod.Namespace, pod.Name), "err", err)
		}
		s.recorder.Eventf(ctx, pod, api.EventNormal, ReasonNotReadyForScheduling, "%s", g.Message)
		now := micro(s.now())
		s.addTrace(ctx, pod, api.TraceSpan{Component: "scheduler", Step: "queue", Start: now, End: now,
			Message: "not ready for scheduling (PreEnqueue " + g.Plugin + "): " + g.Message,
			Details: map[string]any{"plugin": g.Plugin, "message": g.Message}})
		s.log.Info("pod not ready for scheduling", "pod", api.Key(pod.Namespace, pod.Name), "plugin", g.Plugin, "message", g.Message)
	}
}
