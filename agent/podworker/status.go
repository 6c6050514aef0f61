package podworker

import (
	"context"
	"encoding/json"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// statuses builds the container statuses of one list of containers.
func (w *Worker) statuses(pod *api.Pod, spec []api.Container, latest map[string]runtime.ContainerStatus, st *podState, ephemeral bool) []api.ContainerStatus {
	var out []api.ContainerStatus
	for i := range spec {
		c := &spec[i]
		cs := api.ContainerStatus{Name: c.Name, Image: c.Image}
		cur, ok := latest[c.Name]
		f := false
		cs.Started = &f
		switch {
		case !ok:
			cs.State.Waiting = &api.ContainerStateWaiting{Reason: "ContainerCreating"}
			if pf, failed := st.pull[c.Name]; failed {
				// Like the kubelet: the sync that saw the pull fail reports
				// ErrImagePull, the ones waiting out the backoff ImagePullBackOff.
				reason, msg := "ErrImagePull", pf.message
				if pf.shown {
					reason, msg = "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: %s", c.Image, pf.message)
				}
				if pf.config {
					reason, msg = "CreateContainerConfigError", pf.message
				}
				cs.State.Waiting = &api.ContainerStateWaiting{Reason: reason, Message: msg}
			}
		default:
			cs.ContainerID = "containerd://" + cur.ID
			cs.ImageID = cur.Image
			cs.RestartCount = int32(attempt(cur))
			switch cur.State {
			case runtime.StateCreated:
				cs.State.Waiting = &api.ContainerStateWaiting{Reason: "ContainerCreating"}
			case runtime.StateRunning:
				cs.State.Running = &api.ContainerStateRunning{StartedAt: api.NewTime(cur.StartedAt)}
				// Started once the startup probe (if any) has passed; Ready
				// once the readiness probe (if any) passes.
				started := !w.probes.gated(cur.ID)
				cs.Started = &started
				cs.Ready = started
				if c.ReadinessProbe != nil {
					r, _, _ := w.probes.result(cur.ID, probeReadiness)
					cs.Ready = started && r == resultSuccess
				}
				cs.Ready = cs.Ready && !ephemeral // as the kubelet: never ready
			case runtime.StateExited:
				term := &api.ContainerStateTerminated{ExitCode: int32(cur.ExitCode), Reason: cur.Reason,
					StartedAt: api.NewTime(cur.StartedAt), FinishedAt: api.NewTime(cur.FinishedAt), ContainerID: cs.ContainerID}
				if term.Reason == "" {
					term.Reason = runtime.ExitReason(cur.ExitCode, false)
				}
				isInit := false
				for j := range pod.Spec.InitContainers {
					isInit = isInit || pod.Spec.InitContainers[j].Name == c.Name
				}
				if !ephemeral && shouldRestart(pod.Spec.RestartPolicy, cur.ExitCode, isInit) {
					cs.LastTerminationState.Terminated = term
					cs.State.Waiting = &api.ContainerStateWaiting{Reason: "CrashLoopBackOff",
						Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", st.restart[c.Name].delay, c.Name, pod.Name, pod.Namespace, pod.UID)}
				} else {
					cs.State.Terminated = term
				}
			default:
				cs.State.Waiting = &api.ContainerStateWaiting{Reason: "Unknown"}
			}
		}
		// lastState of a restarted container: how the previous attempt
		// ended, read from that container (kept until the next restart).
		if prev, ok := st.previous[c.Name]; ok && cs.LastTerminationState.Terminated == nil && prev.State == runtime.StateExited {
			reason := prev.Reason
			if reason == "" {
				reason = runtime.ExitReason(prev.ExitCode, false)
			}
			cs.LastTerminationState.Terminated = &api.ContainerStateTerminated{ExitCode: int32(prev.ExitCode), Reason: reason,
				StartedAt: api.NewTime(prev.StartedAt), FinishedAt: api.NewTime(prev.FinishedAt), ContainerID: "containerd://" + prev.ID}
		}
		out = append(out, cs)
	}
	return out
}

// computeStatus fills pod.Status from the runtime's view, as the kubelet's
// status manager does: container statuses, phase, conditions.
func (w *Worker) computeStatus(pod *api.Pod, latest map[string]runtime.ContainerStatus, st *podState) {
	s := &pod.Status
	s.HostIP = w.cfg.NodeIP
	switch {
	case pod.Spec.HostNetwork || st.network == nil:
		s.PodIP = w.cfg.NodeIP
	default:
		s.PodIP = st.network.IP
	}
	s.PodIPs = nil
	if s.PodIP != "" {
		s.PodIPs = []api.PodIP{{IP: s.PodIP}}
	}
	s.InitContainerStatuses = w.statuses(pod, pod.Spec.InitContainers, latest, st, false)
	s.ContainerStatuses = w.statuses(pod, pod.Spec.Containers, latest, st, false)
	s.EphemeralContainerStatuses = w.statuses(pod, ephemeralContainers(pod), latest, st, true)
	s.QOSClass = qosClass(pod)

	initDone := true
	initFailed := false
	for _, cs := range s.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		initDone = false
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			initFailed = true
		}
	}

	s.Phase = phase(pod, initDone, initFailed)
	if s.Phase == api.PodSucceeded || s.Phase == api.PodFailed {
		s.Reason, s.Message = "", ""
	}
	ready := s.Phase == api.PodRunning
	for _, cs := range s.ContainerStatuses {
		ready = ready && cs.Ready
	}
	now := api.NewTime(w.cfg.Now())
	setCond(s, api.PodInitialized, initDone, "", now)
	setCond(s, api.ContainersReady, ready, reasonIf(!ready, "ContainersNotReady"), now)
	setCond(s, api.PodReady, ready, reasonIf(!ready, "ContainersNotReady"), now)
	setCond(s, api.PodScheduled, true, "", now)
}

// ephemeralContainers are the pod's ephemeral containers as Containers.
func ephemeralContainers(pod *api.Pod) []api.Container {
	var out []api.Container
	for _, ec := range pod.Spec.EphemeralContainers {
		out = append(out, ec.Container)
	}
	return out
}

func reasonIf(b bool, r string) string {
	if b {
		return r
	}
	return ""
}

// phase follows the kubelet's rules: Pending until every container has
// started once; Succeeded/Failed when every container has terminated and
// none will restart; Running otherwise.
func phase(pod *api.Pod, initDone, initFailed bool) string {
	if initFailed && pod.Spec.RestartPolicy == "Never" {
		return api.PodFailed
	}
	if !initDone {
		return api.PodPending
	}
	var waiting, running, succeeded, failed, restarting int
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			restarting++
		default:
			waiting++
		}
	}
	n := len(pod.Spec.Containers)
	switch {
	case waiting > 0:
		return api.PodPending
	case running > 0 || restarting > 0:
		return api.PodRunning
	case succeeded+failed == n && failed > 0:
		return api.PodFailed
	case succeeded == n:
		return api.PodSucceeded
	}
	return api.PodPending
}

func setCond(s *api.PodStatus, typ string, ok bool, reason string, now api.Time) {
	status := api.ConditionFalse
	if ok {
		status = api.ConditionTrue
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			if s.Conditions[i].Status != status {
				s.Conditions[i].Status, s.Conditions[i].LastTransitionTime = status, now
			}
			s.Conditions[i].Reason = reason
			return
		}
	}
	s.Conditions = append(s.Conditions, api.PodCondition{Type: typ, Status: status, Reason: reason, LastTransitionTime: now})
}

// qosClass: Guaranteed when every container has equal cpu and memory
// requests and limits, BestEffort when none has any, Burstable otherwise.
func qosClass(pod *api.Pod) string {
	any, guaranteed := false, true
	for _, c := range pod.Spec.Containers {
		for _, r := range []string{api.ResourceCPU, api.ResourceMemory} {
			l, hasL := c.Resources.Limits[r]
			q, hasR := c.Resources.Requests[r]
			if hasL || hasR {
				any = true
			}
			if !hasL || (hasR && q.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return "BestEffort"
	case guaranteed:
		return "Guaranteed"
	}
	return "Burstable"
}

// writeStatus writes next's status when it differs from cur's.
func (w *Worker) writeStatus(ctx context.Context, cur, next *api.Pod) (*api.Pod, error) {
	a, _ := json.Marshal(cur.Status)
	b, _ := json.Marshal(next.Status)
	if string(a) == string(b) {
		return cur, nil
	}
	o, err := w.cfg.Client.UpdateStatus(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("update status of pod %s: %w", api.KeyOf(cur), err)
	}
	return o.(*api.Pod), nil
}
