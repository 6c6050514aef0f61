package table

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// The core group (v1) kinds, as Kubernetes' printers.

func namespacePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Status", "The status of the namespace"), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			n := o.(*api.Namespace)
			return []any{n.Name, n.Status.Phase, Age(now, n.CreationTimestamp.Time)}
		},
	}
}

func configMapPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Data", corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			c := o.(*api.ConfigMap)
			return []any{c.Name, int64(len(c.Data) + len(c.BinaryData)), Age(now, c.CreationTimestamp.Time)}
		},
	}
}

func secretPrinter() Printer {
	doc := corev1.Secret{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Type", doc["type"]), col("Data", doc["data"]), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			s := o.(*api.Secret)
			typ := s.Type
			if typ == "" {
				typ = api.SecretTypeOpaque // the default, for objects not yet defaulted
			}
			return []any{s.Name, typ, int64(len(s.Data)), Age(now, s.CreationTimestamp.Time)}
		},
	}
}

func podPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
			col("Status", "The aggregate status of the containers in this pod."),
			col("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageColumn(),
			wideCol("IP", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
			wideCol("Node", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
			wideCol("Nominated Node", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
			wideCol("Readiness Gates", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
		},
		Cells: func(o api.Object, now time.Time) []any {
			p := o.(*api.Pod)
			st := PodStatus(p, now)
			ip := p.Status.PodIP
			if len(p.Status.PodIPs) > 0 {
				ip = p.Status.PodIPs[0].IP
			}
			return []any{p.Name, st.Ready, st.Status, st.Restarts, Age(now, p.CreationTimestamp.Time),
				OrNone(ip), OrNone(p.Spec.NodeName), OrNone(p.Status.NominatedNodeName), "<none>"} // skiff has no readiness gates
		},
	}
}

// PodState is what kubectl shows of a pod in a table.
type PodState struct {
	Ready    string // "1/2"
	Status   string // Running, ContainerCreating, CrashLoopBackOff, Completed, Terminating, Init:0/1, ...
	Restarts string // "3 (5m ago)"
}

// PodStatus computes READY, STATUS and RESTARTS exactly as Kubernetes'
// printPod: the phase, overridden by init container trouble, then by the
// last container's waiting or terminated reason, then Terminating; the
// restarts with the age of the latest one, as kubectl 1.32.
func PodStatus(pod *api.Pod, now time.Time) PodState {
	total := len(pod.Spec.Containers)
	ready, restarts := 0, 0
	var lastRestart time.Time
	reason := pod.Status.Phase
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == api.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
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
	if !initializing || podCondition(pod, api.PodInitialized) {
		// skiff has no restartable (sidecar) init containers, whose
		// restarts Kubernetes keeps here.
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
			if podCondition(pod, api.PodReady) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}
	terminal := pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost":
		reason = "Unknown"
	case pod.DeletionTimestamp != nil && !terminal:
		reason = "Terminating"
	}
	if reason == "" {
		reason = api.PodPending // not yet written by anyone: what the phase defaults to
	}
	r := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		r = fmt.Sprintf("%d (%s ago)", restarts, Age(now, lastRestart))
	}
	return PodState{Ready: fmt.Sprintf("%d/%d", ready, total), Status: reason, Restarts: r}
}

func podCondition(pod *api.Pod, typ string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

func servicePrinter() Printer {
	doc := corev1.ServiceSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Type", doc["type"]),
			col("Cluster-IP", doc["clusterIP"]),
			col("External-IP", doc["externalIPs"]),
			col("Port(s)", doc["ports"]),
			ageColumn(),
			wideCol("Selector", doc["selector"]),
		},
		Cells: func(o api.Object, now time.Time) []any {
			s := o.(*api.Service)
			typ := s.Spec.Type
			if typ == "" {
				typ = "ClusterIP" // the default, for objects not yet defaulted
			}
			ip := s.Spec.ClusterIP
			if len(s.Spec.ClusterIPs) > 0 {
				ip = s.Spec.ClusterIPs[0]
			}
			return []any{s.Name, typ, OrNone(ip), serviceExternalIP(typ), OrNone(ServicePorts(s.Spec.Ports)),
				Age(now, s.CreationTimestamp.Time), labels.FormatLabels(s.Spec.Selector)}
		},
	}
}

// serviceExternalIP is EXTERNAL-IP for a service of type typ (skiff has no
// externalIPs and no load balancers: a LoadBalancer would stay pending).
func serviceExternalIP(typ string) string {
	switch typ {
	case "ClusterIP", "NodePort":
		return "<none>"
	case "LoadBalancer":
		return "<pending>"
	}
	return "<unknown>"
}

// ServicePorts is kubectl's PORT(S): "80/TCP", "80:30080/TCP"; "" for none.
func ServicePorts(ports []api.ServicePort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		parts[i] = fmt.Sprintf("%d/%s", p.Port, proto)
		if p.NodePort > 0 {
			parts[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto)
		}
	}
	return strings.Join(parts, ",")
}

func endpointsPrinter() Printer {
	//lint:ignore SA1019 skiff serves v1 Endpoints; their doc is the column's description, as in Kubernetes
	doc := corev1.Endpoints{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Endpoints", doc["subsets"]), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			e := o.(*api.Endpoints)
			return []any{e.Name, FormatEndpoints(e.Subsets), Age(now, e.CreationTimestamp.Time)}
		},
	}
}

// FormatEndpoints is kubectl's ENDPOINTS: the ready addresses with their
// ports, at most three, then " + N more..."; "<none>" without subsets.
func FormatEndpoints(subsets []api.EndpointSubset) string {
	if len(subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	count := 0
	add := func(s string) {
		count++
		if len(list) < max {
			list = append(list, s)
		}
	}
	for _, ss := range subsets {
		if len(ss.Ports) == 0 { // a headless service without ports
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	s := strings.Join(list, ",")
	if count > max {
		s += fmt.Sprintf(" + %d more...", count-max)
	}
	return s
}

func nodePrinter() Printer {
	info, status := corev1.NodeSystemInfo{}.SwaggerDoc(), corev1.NodeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Status", "The status of the node"),
			col("Roles", "The roles of the node"),
			ageColumn(),
			col("Version", info["kubeletVersion"]),
			wideCol("Internal-IP", status["addresses"]),
			wideCol("External-IP", status["addresses"]),
			wideCol("OS-Image", info["osImage"]),
			wideCol("Kernel-Version", info["kernelVersion"]),
			wideCol("Container-Runtime", info["containerRuntimeVersion"]),
			// skiff's own, after Kubernetes' columns: the GPUs a node offers.
			wideCol("GPUs", "Allocatable nvidia.com/gpu of the node."),
			wideCol("GPU-Product", "The GPU model, from the node's nvidia.com/gpu.product label."),
		},
		Cells: func(o api.Object, now time.Time) []any {
			n := o.(*api.Node)
			ni := n.Status.NodeInfo
			gpus := "0"
			if q, ok := n.Status.Allocatable[api.ResourceNvidiaGPU]; ok {
				gpus = q.String()
			}
			return []any{n.Name, NodeStatus(n), OrNone(strings.Join(NodeRoles(n), ",")), Age(now, n.CreationTimestamp.Time), ni.KubeletVersion,
				OrNone(nodeAddress(n, "InternalIP")), OrNone(nodeAddress(n, "ExternalIP")),
				orUnknown(ni.OSImage), orUnknown(ni.KernelVersion), orUnknown(ni.ContainerRuntimeVersion),
				gpus, OrNone(n.Labels[api.LabelGPUProduct])}
		},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// NodeStatus is "Ready", "NotReady" or "Unknown", plus ",SchedulingDisabled".
func NodeStatus(n *api.Node) string {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			status = "NotReady"
			if c.Status == api.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// NodeRoles are the node's roles, sorted: from node-role.kubernetes.io/ROLE
// labels and the kubernetes.io/role label.
func NodeRoles(n *api.Node) []string {
	seen := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if r := strings.TrimPrefix(k, "node-role.kubernetes.io/"); r != "" {
				seen[r] = true
			}
		case k == "kubernetes.io/role" && v != "":
			seen[v] = true
		}
	}
	roles := make([]string, 0, len(seen))
	for r := range seen {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

func nodeAddress(n *api.Node, typ string) string {
	for _, a := range n.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return ""
}

func eventPrinter() Printer {
	doc := corev1.Event{}.SwaggerDoc()
	name := nameColumn()
	name.Priority = 1
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			col("Last Seen", doc["lastTimestamp"]),
			col("Type", doc["type"]),
			col("Reason", doc["reason"]),
			col("Object", doc["involvedObject"]),
			wideCol("Subobject", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
			wideCol("Source", doc["source"]),
			col("Message", doc["message"]),
			wideCol("First Seen", doc["firstTimestamp"]),
			wideCol("Count", doc["count"]),
			name,
		},
		Cells: func(o api.Object, now time.Time) []any {
			e := o.(*api.Event)
			first := Age(now, e.FirstTimestamp.Time)
			if e.FirstTimestamp.IsZero() {
				first = Age(now, e.EventTime.Time)
			}
			last := Age(now, e.LastTimestamp.Time)
			if e.LastTimestamp.IsZero() {
				last = first
			}
			target := strings.ToLower(e.InvolvedObject.Kind)
			if e.InvolvedObject.Name != "" {
				target += "/" + e.InvolvedObject.Name
			}
			return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, EventSource(e),
				strings.TrimSpace(e.Message), first, int64(max(e.Count, 1)), e.Name}
		},
	}
}

// EventSource is kubectl's SOURCE of an event: "component, host", from
// the reporting controller and instance when source is not set.
func EventSource(e *api.Event) string {
	component, host := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// EventLastSeen is when an event last happened: lastTimestamp, else
// eventTime, else firstTimestamp, else its creation.
func EventLastSeen(e *api.Event) time.Time {
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
