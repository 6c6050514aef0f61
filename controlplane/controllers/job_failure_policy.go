package controllers

import (
	"fmt"
	"slices"
	"time"

	"skiff.dev/skiff/api"
)

// When a Job has failed, as Kubernetes' pod_failure_policy.go and the
// backoff-limit and deadline checks of its job controller: the rules of
// podFailurePolicy (FailJob, FailIndex, Ignore, Count on exit codes and
// pod conditions), backoffLimit (restarts too, with restartPolicy
// OnFailure), activeDeadlineSeconds, and which pods count as failed.

// matchPodFailurePolicy, as Kubernetes': the first rule a failed pod
// matches gives the job failure message (FailJob), whether the failure
// counts toward backoffLimit (not for Ignore) and the action.
func matchPodFailurePolicy(policy *api.PodFailurePolicy, p *api.Pod) (msg string, count bool, action string) {
	if policy == nil {
		return "", true, ""
	}
	for i, rule := range policy.Rules {
		var matched string
		if rule.OnExitCodes != nil {
			cs := matchOnExitCodes(p, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			matched = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, p.Namespace, p.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		} else if len(rule.OnPodConditions) > 0 {
			c := matchOnPodConditions(p, rule.OnPodConditions)
			if c == nil {
				continue
			}
			matched = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", p.Namespace, p.Name, c.Type, rule.Action, i)
		} else {
			continue
		}
		switch rule.Action {
		case api.PodFailurePolicyActionIgnore:
			return "", false, rule.Action
		case api.PodFailurePolicyActionFailIndex, api.PodFailurePolicyActionCount:
			return "", true, rule.Action
		case api.PodFailurePolicyActionFailJob:
			return matched, true, rule.Action
		}
	}
	return "", true, ""
}

func matchOnExitCodes(p *api.Pod, req *api.PodFailurePolicyOnExitCodesRequirement) *api.ContainerStatus {
	for _, list := range [][]api.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i, cs := range list {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == "In" && in) || (req.Operator == "NotIn" && !in) {
				return &list[i]
			}
		}
	}
	return nil
}

func matchOnPodConditions(p *api.Pod, patterns []api.PodFailurePolicyOnPodConditionsPattern) *api.PodCondition {
	for i, c := range p.Status.Conditions {
		for _, pat := range patterns {
			if c.Type == pat.Type && c.Status == pat.Status {
				return &p.Status.Conditions[i]
			}
		}
	}
	return nil
}

// failJobMessage: the message of the first failed pod matching a FailJob rule.
func failJobMessage(job *api.Job, pods []*api.Pod) string {
	if job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, p := range pods {
		if isPodFailedForJob(p, job) {
			if msg, _, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// countedFailures: failed pods minus those an Ignore rule matches.
func countedFailures(job *api.Job, failed []*api.Pod) int {
	n := 0
	for _, p := range failed {
		if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
			n++
		}
	}
	return n
}

// pastBackoffLimitOnFailure: for restartPolicy OnFailure, the container
// restarts of running and pending pods reach backoffLimit.
func pastBackoffLimitOnFailure(job *api.Job, pods []*api.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != api.RestartOnFailure {
		return false
	}
	var n int32
	for _, p := range pods {
		if p.Status.Phase == api.PodRunning || p.Status.Phase == api.PodPending {
			for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				n += cs.RestartCount
			}
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return n > 0
	}
	return n >= *job.Spec.BackoffLimit
}

func pastActiveDeadline(job *api.Job, now time.Time) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || isSuspended(job) {
		return false
	}
	return now.Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// onlyReplaceFailed: podReplacementPolicy Failed (always with a podFailurePolicy).
func onlyReplaceFailed(job *api.Job) bool {
	return (job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == api.PodReplacementFailed) || job.Spec.PodFailurePolicy != nil
}

// isPodFailedForJob: Failed, or (unless only failed pods are replaced)
// deleted before it succeeded.
func isPodFailedForJob(p *api.Pod, job *api.Job) bool {
	if p.Status.Phase == api.PodFailed {
		return true
	}
	if onlyReplaceFailed(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != api.PodSucceeded
}
