package scheduler

import (
	"context"
	"fmt"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Permit in the scheduler, as kube-scheduler's schedulingCycle and
// bindingCycle:
//
//   - The scheduling loop runs Permit right after Reserve. Success: the
//     task binds as usual. A rejection: Unreserve, the assumed pod is
//     forgotten and the pod goes back to the queue with "0/1 nodes are
//     available: 1 REASON." (Kubernetes counts only the chosen node).
//   - Wait: the pod stays assumed (its requests stay counted on the node,
//     so no other pod takes them) and its task runs on a goroutine of its
//     own, which records the wait (an Event and a trace span "permit") and
//     blocks in WaitOnPermit; the loop goes on with the next pod.
//   - Allowed: the task binds. Rejected or timed out: Unreserve, the pod
//     is forgotten (its room is free again, and pods that wanted it move),
//     the PodScheduled condition and a FailedScheduling event say why, and
//     the pod waits in the queue to be tried again.

// Permit outcomes in the trace (api.SchedulingPermitDetails).
const (
	permitWaiting  = api.PermitWaiting
	permitAllowed  = api.PermitAllowed
	permitRejected = api.PermitRejected
)

// ReasonWaitingOnPermit is the Event a pod held at Permit gets (skiff's;
// kube-scheduler only logs "Pod waiting on permit").
const ReasonWaitingOnPermit = "WaitingOnPermit"

// permitResult is what Permit did to one pod.
type permitResult struct {
	outcome string
	plugins []string // the plugins it waited for (or that rejected it)
	message string
	start   time.Time
	end     time.Time
}

// permit runs the Permit plugins for an assumed pod on the scheduling
// goroutine. It returns true when the task should go on to bind (now, or
// after a wait: t.waits). On false the pod was unreserved and forgotten
// and went back to the queue; t.err holds an internal error, if any, and
// t.result.Message the FailedScheduling message of a rejection.
func (s *Scheduler) permit(ctx context.Context, t *task) bool {
	if len(t.fwk.Permit) == 0 {
		return true
	}
	pod := t.assumed.Pod
	st := t.fwk.RunPermit(ctx, t.state, pod, t.node)
	switch {
	case st.IsSuccess():
		return true
	case st.Code() == framework.Wait:
		t.waits = true
		wp := s.waiting.Get(string(pod.UID))
		var plugins []string
		if wp != nil {
			plugins = wp.Pending()
		}
		t.permit = &permitResult{outcome: permitWaiting, plugins: plugins, message: st.Message(), start: s.now()}
		s.log.Debug("waiting on permit", "pod", t.assumed.Key, "node", t.node, "plugins", plugins)
		return true
	}
	t.fwk.RunUnreserve(ctx, t.state, pod, t.node)
	s.cache.ForgetPod(t.assumed.Key)
	if st.IsRejected() {
		now := s.now()
		t.permit = &permitResult{outcome: permitRejected, plugins: []string{st.Plugin()}, message: st.Message(), start: now, end: now}
		t.result.Message = permitFitMessage(st)
		s.queue.AddUnschedulable(t.qp, []string{st.Plugin()})
		return false
	}
	t.err = fmt.Errorf("permit on node %q: %w", t.node, st.AsError())
	s.queue.AddBackoff(t.qp)
	return false
}

// permitFitMessage is Kubernetes' FitError for a Permit rejection: one
// node counted, the chosen one, with the plugin's reason.
func permitFitMessage(st *framework.Status) string {
	return fmt.Sprintf("0/1 nodes are available: 1 %s.", st.Message())
}

// waitOnPermit runs on the task's own goroutine: it records the wait,
// blocks until the pod is allowed, rejected or times out, and reports
// whether to bind.
func (s *Scheduler) waitOnPermit(ctx context.Context, t *task) bool {
	pod, key := t.assumed.Pod, t.assumed.Key
	s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventNormal, ReasonWaitingOnPermit, "%s", t.permit.message)
	s.addTrace(ctx, pod, traceSpans(t.result, time.Time{}, time.Time{}, nil)...)
	s.addTrace(ctx, pod, t.permitSpan())

	st := t.fwk.WaitOnPermit(ctx, pod)
	t.permit.end = s.now()
	if st.IsSuccess() {
		t.permit.outcome = permitAllowed
		s.log.Debug("permit allowed", "pod", key, "node", t.node)
		return true
	}
	t.fwk.RunUnreserve(ctx, t.state, pod, t.node)
	s.cache.ForgetPod(key)
	s.podGone(t.assumed.Pod) // the room it held is free again
	if ctx.Err() != nil {
		return false // the scheduler is stopping
	}
	if !st.IsRejected() {
		s.queue.AddBackoff(t.qp)
		s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventWarning, "FailedScheduling", "%v", st.AsError())
		return false
	}
	s.log.Info("rejected while waiting on permit", "pod", key, "node", t.node, "plugin", st.Plugin(), "message", st.Message())
	t.permit.outcome, t.permit.message = permitRejected, st.Message()
	if p := st.Plugin(); p != "" {
		t.permit.plugins = []string{p}
	}
	msg := permitFitMessage(st)
	s.queue.AddUnschedulable(t.qp, []string{st.Plugin()})
	cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: "Unschedulable", Message: msg}
	if err := s.updateStatus(ctx, t.qp.Info.Pod, cond, ""); err != nil && !api.IsNotFound(err) {
		s.log.Error("update pod status", "pod", key, "err", err)
	}
	s.recorder.Eventf(ctx, t.qp.Info.Pod, api.EventWarning, "FailedScheduling", "%s", msg)
	s.addTrace(ctx, pod, t.permitSpan())
	return false
}

// spans are the trace spans of an attempt (and of its binding, when
// bindStart is set), with the Permit span before the binding. After a
// wait at Permit the attempt was recorded when the wait began: only the
// end of the wait and the binding follow.
func (t *task) spans(bindStart, bindEnd time.Time, bindErr error) []api.TraceSpan {
	if t.permit == nil {
		return traceSpans(t.result, bindStart, bindEnd, bindErr)
	}
	var out []api.TraceSpan
	if !t.waits {
		out = traceSpans(t.result, time.Time{}, time.Time{}, nil)
	}
	out = append(out, t.permitSpan())
	if !bindStart.IsZero() {
		all := traceSpans(t.result, bindStart, bindEnd, bindErr)
		out = append(out, all[len(all)-1])
	}
	return out
}

// permitSpan is the trace span "permit" of t's Permit result.
func (t *task) permitSpan() api.TraceSpan {
	p := t.permit
	var msg string
	plugins := fmt.Sprint(p.plugins)
	switch p.outcome {
	case permitWaiting:
		msg = fmt.Sprintf("waiting at Permit %s on node %s: %s", plugins, t.node, p.message)
	case permitAllowed:
		msg = fmt.Sprintf("allowed at Permit %s after waiting %v", plugins, p.end.Sub(p.start).Round(time.Millisecond))
	default:
		msg = fmt.Sprintf("rejected at Permit %s after waiting %v: %s", plugins, p.end.Sub(p.start).Round(time.Millisecond), p.message)
	}
	end := p.end
	if end.IsZero() {
		end = p.start
	}
	return api.TraceSpan{
		Component: "scheduler", Step: "permit", Start: micro(p.start), End: micro(end), Node: t.node, Message: msg,
		Details: map[string]any{"outcome": p.outcome, "plugins": p.plugins, "message": p.message},
	}
}
