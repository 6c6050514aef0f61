package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/api"
)

// columns describe the kubectl table of one kind.
type columns struct {
	headers []string
	// wide are the extra -o wide columns.
	wide []string
	// nameCol is the index of the NAME cell (-1: none), which gets the
	// kind prefix when several kinds are printed.
	nameCol int
	// row renders one object: its cells and its wide cells.
	row func(obj api.Object, now time.Time) (cells, wide []string)
}

// columnsFor returns kubectl's columns for a kind; unknown kinds get NAME AGE.
func columnsFor(k *api.Kind) columns {
	switch k.Kind {
	case "Pod":
		return columns{
			headers: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
			wide:    []string{"IP", "NODE", "NOMINATED NODE", "READINESS GATES"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				p := o.(*api.Pod)
				st := podStatus(p, now)
				return []string{p.Name, st.Ready, st.Status, st.Restarts, age(now, p.CreationTimestamp.Time)},
					[]string{orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), "<none>"}
			},
		}
	case "Deployment":
		return columns{
			headers: []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"},
			wide:    []string{"CONTAINERS", "IMAGES", "SELECTOR"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				d := o.(*api.Deployment)
				c, i := containersImages(d.Spec.Template.Spec)
				return []string{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
						itoa(d.Status.UpdatedReplicas), itoa(d.Status.AvailableReplicas), age(now, d.CreationTimestamp.Time)},
					[]string{c, i, selectorString(d.Spec.Selector)}
			},
		}
	case "ReplicaSet":
		return columns{
			headers: []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"},
			wide:    []string{"CONTAINERS", "IMAGES", "SELECTOR"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				rs := o.(*api.ReplicaSet)
				c, i := containersImages(rs.Spec.Template.Spec)
				return []string{rs.Name, itoa(replicas(rs.Spec.Replicas)), itoa(rs.Status.Replicas), itoa(rs.Status.ReadyReplicas), age(now, rs.CreationTimestamp.Time)},
					[]string{c, i, selectorString(rs.Spec.Selector)}
			},
		}
	case "Service":
		return columns{
			headers: []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"},
			wide:    []string{"SELECTOR"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				s := o.(*api.Service)
				typ := s.Spec.Type
				if typ == "" {
					typ = "ClusterIP"
				}
				return []string{s.Name, typ, orNone(s.Spec.ClusterIP), "<none>", servicePorts(s.Spec.Ports), age(now, s.CreationTimestamp.Time)},
					[]string{labelString(s.Spec.Selector)}
			},
		}
	case "Endpoints":
		return columns{
			headers: []string{"NAME", "ENDPOINTS", "AGE"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				e := o.(*api.Endpoints)
				return []string{e.Name, formatEndpoints(e.Subsets), age(now, e.CreationTimestamp.Time)}, nil
			},
		}
	case "Node":
		return columns{
			headers: []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"},
			wide:    []string{"INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME", "GPUS", "GPU-PRODUCT"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				n := o.(*api.Node)
				info := n.Status.NodeInfo
				return []string{n.Name, nodeStatus(n), nodeRoles(n), age(now, n.CreationTimestamp.Time), orNone(info.KubeletVersion)},
					[]string{orNone(nodeAddress(n, "InternalIP")), orNone(nodeAddress(n, "ExternalIP")),
						orNone(info.OSImage), orNone(info.KernelVersion), orNone(info.ContainerRuntimeVersion), gpuColumns(n)[0], gpuColumns(n)[1]}
			},
		}
	case "ConfigMap":
		return columns{
			headers: []string{"NAME", "DATA", "AGE"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				c := o.(*api.ConfigMap)
				return []string{c.Name, strconv.Itoa(len(c.Data) + len(c.BinaryData)), age(now, c.CreationTimestamp.Time)}, nil
			},
		}
	case "Secret":
		return columns{
			headers: []string{"NAME", "TYPE", "DATA", "AGE"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				s := o.(*api.Secret)
				typ := s.Type
				if typ == "" {
					typ = "Opaque"
				}
				return []string{s.Name, typ, strconv.Itoa(len(s.Data)), age(now, s.CreationTimestamp.Time)}, nil
			},
		}
	case "Namespace":
		return columns{
			headers: []string{"NAME", "STATUS", "AGE"},
			row: func(o api.Object, now time.Time) ([]string, []string) {
				n := o.(*api.Namespace)
				phase := n.Status.Phase
				if phase == "" {
					phase = "Active"
				}
				return []string{n.Name, phase, age(now, n.CreationTimestamp.Time)}, nil
			},
		}
	case "Event":
		return columns{
			headers: []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"},
			wide:    []string{"SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"},
			nameCol: -1,
			row: func(o api.Object, now time.Time) ([]string, []string) {
				e := o.(*api.Event)
				obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
				first := e.FirstTimestamp.Time
				if first.IsZero() {
					first = e.EventTime.Time
				}
				return []string{age(now, eventLastSeen(e)), e.Type, e.Reason, obj, strings.TrimSpace(e.Message)},
					[]string{e.InvolvedObject.FieldPath, eventSource(e), age(now, first), strconv.Itoa(int(max(e.Count, 1))), e.Name}
			},
		}
	}
	return columns{
		headers: []string{"NAME", "AGE"},
		row: func(o api.Object, now time.Time) ([]string, []string) {
			m := o.GetObjectMeta()
			return []string{m.Name, age(now, m.CreationTimestamp.Time)}, nil
		},
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// replicas reads a *int32 replica count; unset means 1 (the default).
func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func selectorString(s *api.LabelSelector) string {
	if s == nil {
		return "<none>"
	}
	str := s.String()
	if str == "" {
		return "<none>"
	}
	return str
}

func containersImages(spec api.PodSpec) (string, string) {
	var names, images []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

// servicePorts is kubectl's PORT(S): "80/TCP", "80:30080/TCP".
func servicePorts(ports []api.ServicePort) string {
	if len(ports) == 0 {
		return "<none>"
	}
	parts := make([]string, len(ports))
	for i, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		if p.NodePort > 0 {
			parts[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto)
		} else {
			parts[i] = fmt.Sprintf("%d/%s", p.Port, proto)
		}
	}
	return strings.Join(parts, ",")
}

// formatEndpoints is kubectl's ENDPOINTS: at most three, then "+ N more...".
func formatEndpoints(subsets []api.EndpointSubset) string {
	const max = 3
	var list []string
	count := 0
	for _, ss := range subsets {
		ports := ss.Ports
		if len(ports) == 0 {
			ports = []api.EndpointPort{{}}
		}
		for _, port := range ports {
			for _, addr := range ss.Addresses {
				count++
				if len(list) < max {
					if port.Port == 0 {
						list = append(list, addr.IP)
					} else {
						list = append(list, fmt.Sprintf("%s:%d", addr.IP, port.Port))
					}
				}
			}
		}
	}
	if count == 0 {
		return "<none>"
	}
	s := strings.Join(list, ",")
	if count > max {
		s += fmt.Sprintf(" + %d more...", count-max)
	}
	return s
}

// nodeStatus is "Ready", "NotReady" or "Unknown", plus ",SchedulingDisabled".
func nodeStatus(n *api.Node) string {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			switch c.Status {
			case api.ConditionTrue:
				status = "Ready"
			case api.ConditionFalse:
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles reads node-role.kubernetes.io/ROLE labels.
func nodeRoles(n *api.Node) string {
	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if r := strings.TrimPrefix(k, "node-role.kubernetes.io/"); r != "" {
				roles = append(roles, r)
			}
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	sort.Strings(roles)
	return strings.Join(roles, ",")
}

func nodeAddress(n *api.Node, typ string) string {
	for _, a := range n.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return ""
}

func eventLastSeen(e *api.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func eventSource(e *api.Event) string {
	src := e.Source.Component
	if src == "" {
		src = e.ReportingController
	}
	if e.Source.Host != "" {
		src += ", " + e.Source.Host
	}
	return src
}

// podState is what kubectl shows of a pod in a table.
type podState struct {
	Ready    string // "1/2"
	Status   string // Running, ContainerCreating, CrashLoopBackOff, Completed, Terminating, Init:0/1, ...
	Restarts string // "3 (5m ago)"
}

// podStatus computes READY, STATUS and RESTARTS exactly as kubectl's
// printPod: the phase, overridden by init container trouble, then by the
// last container's waiting or terminated reason, then Terminating.
func podStatus(pod *api.Pod, now time.Time) podState {
	total := len(pod.Spec.Containers)
	ready, restarts := 0, 0
	var lastRestart time.Time
	reason := pod.Status.Phase
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == api.PodScheduled && c.Reason == "SchedulingGated" {
			reason = "SchedulingGated"
		}
	}
	noteRestart := func(cs api.ContainerStatus) {
		restarts += int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
	}
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		noteRestart(cs)
		st := cs.State
		switch {
		case st.Terminated != nil && st.Terminated.ExitCode == 0:
			continue
		case st.Terminated != nil:
			switch {
			case st.Terminated.Reason != "":
				reason = "Init:" + st.Terminated.Reason
			case st.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", st.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", st.Terminated.ExitCode)
			}
		case st.Waiting != nil && st.Waiting.Reason != "" && st.Waiting.Reason != "PodInitializing":
			reason = "Init:" + st.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing || hasCondition(pod, api.PodInitialized) {
		restarts, lastRestart = 0, time.Time{}
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			noteRestart(cs)
			st := cs.State
			switch {
			case st.Waiting != nil && st.Waiting.Reason != "":
				reason = st.Waiting.Reason
			case st.Terminated != nil && st.Terminated.Reason != "":
				reason = st.Terminated.Reason
			case st.Terminated != nil && st.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", st.Terminated.Signal)
			case st.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", st.Terminated.ExitCode)
			case cs.Ready && st.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			if hasCondition(pod, api.PodReady) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}
	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == "NodeLost" {
			reason = "Unknown"
		} else {
			reason = "Terminating"
		}
	}
	if reason == "" {
		reason = api.PodPending
	}
	r := strconv.Itoa(restarts)
	if restarts > 0 && !lastRestart.IsZero() {
		r = fmt.Sprintf("%d (%s ago)", restarts, age(now, lastRestart))
	}
	return podState{Ready: fmt.Sprintf("%d/%d", ready, total), Status: reason, Restarts: r}
}

func hasCondition(pod *api.Pod, typ string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ && c.Status == api.ConditionTrue {
			return true
		}
	}
	return false
}
