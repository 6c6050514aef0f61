package cli

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// describeCmd is `skiff describe`: kubectl-like sections per kind, always
// ending with the object's Events.
type describeCmd struct {
	root          *Root
	args          []string
	selector      string
	allNamespaces bool
}

func newDescribeCmd(r *Root) *cobra.Command {
	c := &describeCmd{root: r}
	cmd := &cobra.Command{
		Use:   "describe KIND [NAME_PREFIX...] | KIND/NAME | KIND -l SELECTOR",
		Short: "Show details of a resource, with its events",
		Example: `  skiff describe pod gpu-inference-7d9c-x2x1z
  skiff describe deploy/nginx-demo
  skiff describe nodes`,
		ValidArgsFunction: r.completeResourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&c.selector, "selector", "l", "", "label selector")
	cmd.Flags().BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "across all namespaces")
	return cmd
}

// Run describes every object named, or matching a name prefix, or selected.
func (c *describeCmd) Run(ctx context.Context) error {
	refs, err := parseResourceArgs("describe", c.args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	failed := false
	first := true
	for _, ref := range refs {
		objs, ok := c.find(ctx, cl, ref)
		failed = failed || !ok
		for _, o := range objs {
			if !first {
				fmt.Fprintln(c.root.Stdout)
				fmt.Fprintln(c.root.Stdout)
			}
			first = false
			if err := describeObject(ctx, c.root.Stdout, cl, ref.Kind, o, c.root.Now()); err != nil {
				return err
			}
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// find gets the named objects; a name that is not found matches as a
// prefix, as kubectl describe does.
func (c *describeCmd) find(ctx context.Context, cl client.Interface, ref resourceRef) ([]api.Object, bool) {
	ns := c.root.namespaceFor(ref.Kind, c.allNamespaces)
	opts := api.ListOptions{LabelSelector: c.selector}
	if len(ref.Names) == 0 {
		objs, _, err := cl.List(ctx, ref.Kind, ns, opts)
		if err != nil {
			c.root.report(err)
			return nil, false
		}
		if len(objs) == 0 {
			if ref.Kind.Namespaced && !c.allNamespaces {
				fmt.Fprintf(c.root.Stderr, "No resources found in %s namespace.\n", c.root.Namespace)
			} else {
				fmt.Fprintln(c.root.Stderr, "No resources found")
			}
		}
		return objs, true
	}
	var out []api.Object
	ok := true
	for _, name := range ref.Names {
		o, err := cl.Get(ctx, ref.Kind, ns, name)
		if err == nil {
			out = append(out, o)
			continue
		}
		if api.IsNotFound(err) {
			all, _, lerr := cl.List(ctx, ref.Kind, ns, opts)
			var matched []api.Object
			if lerr == nil {
				for _, o := range all {
					if strings.HasPrefix(o.GetObjectMeta().Name, name) {
						matched = append(matched, o)
					}
				}
			}
			if len(matched) > 0 {
				out = append(out, matched...)
				continue
			}
		}
		c.root.report(err)
		ok = false
	}
	return out, ok
}

// describeObject writes the sections of one object, then its events.
func describeObject(ctx context.Context, out interface{ Write([]byte) (int, error) }, cl client.Interface, k *api.Kind, obj api.Object, now time.Time) error {
	w := newDescribeWriter(out)
	switch o := obj.(type) {
	case *api.Pod:
		describePod(ctx, w, cl, o)
	case *api.Deployment:
		describeDeployment(ctx, w, cl, o)
	case *api.ReplicaSet:
		describeReplicaSet(ctx, w, cl, o)
	case *api.Job:
		describeJob(w, o)                    // describe_job.go
		describeJobQueue(ctx, w, cl, o, now) // describe_kueue.go
	case *api.Workload:
		describeWorkload(ctx, w, cl, o, now)
	case *api.HorizontalPodAutoscaler:
		describeHPA(w, o) // describe_hpa.go
	case *api.DaemonSet: // describe_workloads.go
		describeDaemonSet(ctx, w, cl, o, now)
	case *api.StatefulSet:
		describeStatefulSet(ctx, w, cl, o, now)
	case *api.CronJob:
		describeCronJob(w, o, now)
	case *api.PodDisruptionBudget:
		describePodDisruptionBudget(w, o)
	case *api.Service:
		describeService(ctx, w, cl, o)
	case *api.ResourceClaim: // describe_dra.go
		describeResourceClaim(w, o)
	case *api.ResourceClaimTemplate:
		describeResourceClaimTemplate(w, o)
	case *api.DeviceClass:
		describeDeviceClass(w, o)
	case *api.ResourceSlice:
		describeResourceSlice(ctx, w, cl, o)
	case *api.Node:
		describeNode(ctx, w, cl, o, now)
	case *api.Namespace:
		w.objectHeader(&o.ObjectMeta, false)
		w.line(0, "Status:\t%s\n", orDefault(o.Status.Phase, "Active"))
		if err := describeNamespaceLimits(ctx, w, cl, o.Name); err != nil { // describe_quota.go
			return err
		}
		return w.Flush()
	case *api.ResourceQuota:
		describeQuota(w, o)
		return w.Flush()
	case *api.LimitRange:
		describeLimitRange(w, o)
		return w.Flush()
	case *api.ConfigMap:
		w.objectHeader(&o.ObjectMeta, true)
		w.line(0, "\nData\n====\n")
		for _, key := range sortedKeys(o.Data) {
			w.line(0, "%s:\n----\n%s\n\n", key, o.Data[key])
		}
		w.line(0, "\nBinaryData\n====\n")
		for _, key := range sortedKeys(o.BinaryData) {
			w.line(0, "%s: %d bytes\n", key, len(o.BinaryData[key]))
		}
		w.line(0, "\n")
	case *api.Secret:
		w.objectHeader(&o.ObjectMeta, true)
		w.line(0, "\nType:\t%s\n\nData\n====\n", orDefault(o.Type, "Opaque"))
		for _, key := range sortedKeys(o.Data) {
			w.line(0, "%s:\t%d bytes\n", key, len(o.Data[key]))
		}
	case *api.Endpoints:
		w.objectHeader(&o.ObjectMeta, true)
		w.line(0, "Subsets:\n")
		for _, ss := range o.Subsets {
			var ready, notReady []string
			for _, a := range ss.Addresses {
				ready = append(ready, a.IP)
			}
			for _, a := range ss.NotReadyAddresses {
				notReady = append(notReady, a.IP)
			}
			w.line(1, "Addresses:\t%s\n", table.OrNone(strings.Join(ready, ",")))
			w.line(1, "NotReadyAddresses:\t%s\n", table.OrNone(strings.Join(notReady, ",")))
			w.line(1, "Ports:\n")
			w.line(2, "Name\tPort\tProtocol\n")
			w.line(2, "----\t----\t--------\n")
			for _, p := range ss.Ports {
				w.line(2, "%s\t%d\t%s\n", orDefault(p.Name, "<unset>"), p.Port, orDefault(p.Protocol, "TCP"))
			}
		}
	case *api.Event:
		w.objectHeader(&o.ObjectMeta, true)
		w.line(0, "Involved Object:\t%s/%s\n", o.InvolvedObject.Kind, o.InvolvedObject.Name)
		w.line(0, "Type:\t%s\nReason:\t%s\nMessage:\t%s\nSource:\t%s\nCount:\t%d\n", o.Type, o.Reason, o.Message, table.EventSource(o), o.Count)
		w.line(0, "First Timestamp:\t%s\nLast Timestamp:\t%s\n", describeTime(o.FirstTimestamp.Time), describeTime(table.EventLastSeen(o)))
		return w.Flush()
	default:
		m := obj.GetObjectMeta()
		w.objectHeader(m, k.Namespaced)
		w.line(0, "CreationTimestamp:\t%s\n", describeTime(m.CreationTimestamp.Time))
	}
	events, err := eventsFor(ctx, cl, k, obj)
	if err != nil {
		return err
	}
	printEvents(w, events, now)
	if h, ok := obj.(*api.HorizontalPodAutoscaler); ok {
		describeHPADecisions(ctx, w, cl, h) // describe_hpa.go: skiff's own, after kubectl's
	}
	return w.Flush()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// eventsFor lists the events about obj (by involvedObject fields).
func eventsFor(ctx context.Context, cl client.Interface, k *api.Kind, obj api.Object) ([]*api.Event, error) {
	m := obj.GetObjectMeta()
	sel := fmt.Sprintf("involvedObject.name=%s,involvedObject.kind=%s", m.Name, k.Kind)
	ns := m.Namespace
	if k.Namespaced {
		sel += ",involvedObject.namespace=" + m.Namespace
	}
	evs, _, err := client.List[*api.Event](ctx, cl, ns, api.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list events of %s %q: %w", k.Resource, m.Name, err)
	}
	var out []*api.Event
	for _, e := range evs {
		// Events of an earlier object of the same name do not belong here.
		if e.InvolvedObject.UID == "" || m.UID == "" || e.InvolvedObject.UID == m.UID {
			out = append(out, e)
		}
	}
	return out, nil
}

func controlledBy(w *describeWriter, obj api.Object) {
	if ref := api.ControllerOf(obj); ref != nil {
		w.line(0, "Controlled By:\t%s/%s\n", ref.Kind, ref.Name)
	}
}

func describePod(ctx context.Context, w *describeWriter, cl client.Interface, p *api.Pod) {
	w.line(0, "Name:\t%s\n", p.Name)
	w.line(0, "Namespace:\t%s\n", p.Namespace)
	prio := int32(0)
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	w.line(0, "Priority:\t%d\n", prio)
	if p.Spec.PriorityClassName != "" {
		w.line(0, "Priority Class Name:\t%s\n", p.Spec.PriorityClassName)
	}
	w.line(0, "Service Account:\t%s\n", orDefault(p.Spec.ServiceAccountName, "default"))
	node := "<none>"
	if p.Spec.NodeName != "" {
		node = p.Spec.NodeName
		if p.Status.HostIP != "" {
			node += "/" + p.Status.HostIP
		}
	}
	w.line(0, "Node:\t%s\n", node)
	if p.Status.StartTime != nil {
		w.line(0, "Start Time:\t%s\n", describeTime(p.Status.StartTime.Time))
	}
	w.labels(0, p.Labels)
	w.annotations(0, p.Annotations)
	if p.DeletionTimestamp != nil {
		w.line(0, "Status:\tTerminating (lasts %s)\n", shortAge(time.Now(), p.DeletionTimestamp.Time))
		if p.DeletionGracePeriodSeconds != nil {
			w.line(0, "Termination Grace Period:\t%ds\n", *p.DeletionGracePeriodSeconds)
		}
	} else {
		w.line(0, "Status:\t%s\n", orDefault(p.Status.Phase, api.PodPending))
	}
	if p.Status.Reason != "" {
		w.line(0, "Reason:\t%s\n", p.Status.Reason)
	}
	if p.Status.Message != "" {
		w.line(0, "Message:\t%s\n", p.Status.Message)
	}
	w.line(0, "IP:\t%s\n", p.Status.PodIP)
	if len(p.Status.PodIPs) > 0 {
		w.line(0, "IPs:\n")
		for _, ip := range p.Status.PodIPs {
			w.line(1, "IP:\t%s\n", ip.IP)
		}
	} else {
		w.line(0, "IPs:\t<none>\n")
	}
	controlledBy(w, p)
	printContainers(w, 0, "Init Containers", p.Spec.InitContainers, p.Status.InitContainerStatuses, time.Now())
	printContainers(w, 0, "Containers", p.Spec.Containers, p.Status.ContainerStatuses, time.Now())
	var ephemeral []api.Container // kubectl debug's (kubectl prints them as containers)
	for _, ec := range p.Spec.EphemeralContainers {
		ephemeral = append(ephemeral, ec.Container)
	}
	printContainers(w, 0, "Ephemeral Containers", ephemeral, p.Status.EphemeralContainerStatuses, time.Now())
	describeSimulatedProbes(ctx, w, cl, p)
	if len(p.Status.Conditions) > 0 {
		w.line(0, "Conditions:\n")
		w.line(1, "Type\tStatus\n")
		for _, c := range p.Status.Conditions {
			w.line(1, "%v \t%v \n", c.Type, c.Status)
		}
	}
	printVolumes(w, 0, p.Spec.Volumes)
	if p.Status.QOSClass != "" {
		w.line(0, "QoS Class:\t%s\n", p.Status.QOSClass)
	}
	w.printMap(0, "Node-Selectors", p.Spec.NodeSelector, "=")
	printTolerations(w, 0, p.Spec.Tolerations)
	printScheduling(ctx, w, cl, p)
}

// printScheduling summarises the scheduler's last attempt from the pod's
// trace: what it decided per node. Silent when there is no trace.
func printScheduling(ctx context.Context, w *describeWriter, cl client.Interface, p *api.Pod) {
	tr, err := cl.GetTrace(ctx, p.Namespace, p.Name)
	if err != nil || tr == nil {
		return
	}
	var spans []api.TraceSpan
	for _, s := range tr.Spans {
		if s.Component == "scheduler" {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		return
	}
	// The last attempt: spans since the last "filter" (or the last few).
	start := 0
	for i, s := range spans {
		if s.Step == "filter" || s.Step == "queue" {
			start = i
		}
	}
	w.line(0, "Scheduling:\t(last attempt, from `skiff trace pod %s`)\n", p.Name)
	for _, s := range spans[start:] {
		line := s.Step
		if s.Node != "" {
			line += " " + s.Node
		}
		w.line(1, "%s:\t%s\n", line, orDefault(s.Message, "-"))
	}
	// The per-node, per-plugin record of that attempt, as the scheduler renders it.
	if table := api.ExplainSchedulingTrace(p.Name, spans); table != "" {
		for _, l := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
			w.line(1, "%s\n", l)
		}
	}
}

func describeDeployment(ctx context.Context, w *describeWriter, cl client.Interface, d *api.Deployment) {
	w.line(0, "Name:\t%s\n", d.Name)
	w.line(0, "Namespace:\t%s\n", d.Namespace)
	w.line(0, "CreationTimestamp:\t%s\n", describeTime(d.CreationTimestamp.Time))
	w.labels(0, d.Labels)
	w.annotations(0, d.Annotations)
	w.line(0, "Selector:\t%s\n", table.Selector(d.Spec.Selector))
	st := d.Status
	w.line(0, "Replicas:\t%d desired | %d updated | %d total | %d available | %d unavailable\n",
		table.Replicas(d.Spec.Replicas), st.UpdatedReplicas, st.Replicas, st.AvailableReplicas, st.UnavailableReplicas)
	strategy := orDefault(d.Spec.Strategy.Type, "RollingUpdate")
	w.line(0, "StrategyType:\t%s\n", strategy)
	w.line(0, "MinReadySeconds:\t%d\n", d.Spec.MinReadySeconds)
	if strategy == "RollingUpdate" {
		maxUnavail, maxSurge := "25%", "25%"
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			if ru.MaxUnavailable != nil {
				maxUnavail = ru.MaxUnavailable.String()
			}
			if ru.MaxSurge != nil {
				maxSurge = ru.MaxSurge.String()
			}
		}
		w.line(0, "RollingUpdateStrategy:\t%s max unavailable, %s max surge\n", maxUnavail, maxSurge)
	}
	printPodTemplate(w, 0, d.Spec.Template)
	if len(st.Conditions) > 0 {
		w.line(0, "Conditions:\n")
		w.line(1, "Type\tStatus\tReason\n")
		w.line(1, "----\t------\t------\n")
		for _, c := range st.Conditions {
			w.line(1, "%v \t%v\t%v\n", c.Type, c.Status, c.Reason)
		}
	}
	rss, err := replicaSetsOf(ctx, cl, d)
	if err != nil {
		return
	}
	var newRS *api.ReplicaSet
	var old []string
	for _, rs := range rss {
		t := templateWithoutHash(rs.Spec.Template)
		if newRS == nil && kubectl.SameTemplate(t, d.Spec.Template) {
			newRS = rs
			continue
		}
		if table.Replicas(rs.Spec.Replicas) > 0 || rs.Status.Replicas > 0 {
			old = append(old, fmt.Sprintf("%s (%d/%d replicas created)", rs.Name, rs.Status.Replicas, table.Replicas(rs.Spec.Replicas)))
		}
	}
	w.line(0, "OldReplicaSets:\t%s\n", table.OrNone(strings.Join(old, ", ")))
	if newRS != nil {
		w.line(0, "NewReplicaSet:\t%s (%d/%d replicas created)\n", newRS.Name, newRS.Status.Replicas, table.Replicas(newRS.Spec.Replicas))
	} else {
		w.line(0, "NewReplicaSet:\t<none>\n")
	}
}

func describeReplicaSet(ctx context.Context, w *describeWriter, cl client.Interface, rs *api.ReplicaSet) {
	w.line(0, "Name:\t%s\n", rs.Name)
	w.line(0, "Namespace:\t%s\n", rs.Namespace)
	w.line(0, "Selector:\t%s\n", table.Selector(rs.Spec.Selector))
	w.labels(0, rs.Labels)
	w.annotations(0, rs.Annotations)
	controlledBy(w, rs)
	w.line(0, "Replicas:\t%d current / %d desired\n", rs.Status.Replicas, table.Replicas(rs.Spec.Replicas))
	printPodsStatus(ctx, w, cl, rs) // describe_workloads.go
	printPodTemplate(w, 0, rs.Spec.Template)
}

func describeService(ctx context.Context, w *describeWriter, cl client.Interface, s *api.Service) {
	w.objectHeader(&s.ObjectMeta, true)
	w.line(0, "Selector:\t%s\n", labelString(s.Spec.Selector))
	w.line(0, "Type:\t%s\n", orDefault(s.Spec.Type, "ClusterIP"))
	w.line(0, "IP:\t%s\n", table.OrNone(s.Spec.ClusterIP))
	var ep *api.Endpoints
	if e, err := client.Get[*api.Endpoints](ctx, cl, s.Namespace, s.Name); err == nil {
		ep = e
	}
	for _, p := range s.Spec.Ports {
		proto := orDefault(p.Protocol, "TCP")
		name := orDefault(p.Name, "<unset>")
		w.line(0, "Port:\t%s\t%d/%s\n", name, p.Port, proto)
		tp := p.TargetPort.String()
		if tp == "0" || tp == "" {
			tp = fmt.Sprint(p.Port)
		}
		w.line(0, "TargetPort:\t%s/%s\n", tp, proto)
		if p.NodePort != 0 {
			w.line(0, "NodePort:\t%s\t%d/%s\n", name, p.NodePort, proto)
		}
		eps := "<none>"
		if ep != nil {
			eps = table.FormatEndpoints(ep.Subsets)
		}
		w.line(0, "Endpoints:\t%s\n", eps)
	}
	w.line(0, "Session Affinity:\t%s\n", orDefault(s.Spec.SessionAffinity, "None"))
}

// describeNodeLease is kubectl's Lease block of a node: its heartbeat
// Lease in kube-node-lease (agent/lease.go).
func describeNodeLease(ctx context.Context, w *describeWriter, cl client.Interface, node string) {
	o, err := cl.Get(ctx, api.MustKindOf(&api.Lease{}), api.NamespaceNodeLease, node)
	if err != nil {
		w.line(0, "Lease:\tFailed to get lease: %s\n", err)
		return
	}
	l := o.(*api.Lease)
	unset := func(t *api.MicroTime) string {
		if t == nil {
			return "<unset>"
		}
		return describeTime(t.Time)
	}
	holder := "<unset>"
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	w.line(0, "Lease:\n")
	w.line(1, "HolderIdentity:\t%s\n", holder)
	w.line(1, "AcquireTime:\t%s\n", unset(l.Spec.AcquireTime))
	w.line(1, "RenewTime:\t%s\n", unset(l.Spec.RenewTime))
}

func describeNode(ctx context.Context, w *describeWriter, cl client.Interface, n *api.Node, now time.Time) {
	w.line(0, "Name:\t%s\n", n.Name)
	w.line(0, "Roles:\t%s\n", table.OrNone(strings.Join(table.NodeRoles(n), ",")))
	w.labels(0, n.Labels)
	w.printMap(0, "Annotations", n.Annotations, ": ", "kubectl.kubernetes.io/last-applied-configuration",
		gputopology.AnnotationTopology, gputopology.AnnotationAllocations, gputopology.AnnotationDevices) // shown as the GPUs: and GPU devices: sections
	w.line(0, "CreationTimestamp:\t%s\n", describeTime(n.CreationTimestamp.Time))
	printTaints(w, n.Spec.Taints)
	w.line(0, "Unschedulable:\t%v\n", n.Spec.Unschedulable)
	describeNodeLease(ctx, w, cl, n.Name)
	if len(n.Status.Conditions) > 0 {
		w.line(0, "Conditions:\n")
		w.line(1, "Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
		w.line(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
		for _, c := range n.Status.Conditions {
			w.line(1, "%v \t%v \t%s \t%s \t%v \t%v\n", c.Type, c.Status, describeTime(c.LastHeartbeatTime.Time), describeTime(c.LastTransitionTime.Time), c.Reason, c.Message)
		}
	}
	w.line(0, "Addresses:\n")
	for _, a := range n.Status.Addresses {
		w.line(1, "%s:\t%s\n", a.Type, a.Address)
	}
	printResources(w, 0, "Capacity", n.Status.Capacity)
	printResources(w, 0, "Allocatable", n.Status.Allocatable)
	pods, _, err := client.List[*api.Pod](ctx, cl, "", api.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	var running []*api.Pod
	for _, p := range pods {
		if p.Spec.NodeName == n.Name && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
			running = append(running, p)
		}
	}
	describeNodeGPUs(w, n)                // print_gpus.go
	describeNodeGPUDevices(w, n, running) // each GPU split into its devices (a HAMi node's slices and their pods)
	info := n.Status.NodeInfo
	w.line(0, "System Info:\n")
	w.line(1, "Machine ID:\t%s\n", info.MachineID)
	w.line(1, "Kernel Version:\t%s\n", info.KernelVersion)
	w.line(1, "OS Image:\t%s\n", info.OSImage)
	w.line(1, "Operating System:\t%s\n", info.OperatingSystem)
	w.line(1, "Architecture:\t%s\n", info.Architecture)
	w.line(1, "Container Runtime Version:\t%s\n", info.ContainerRuntimeVersion)
	w.line(1, "Kubelet Version:\t%s\n", info.KubeletVersion)
	if n.Spec.PodCIDR != "" {
		w.line(0, "PodCIDR:\t%s\n", n.Spec.PodCIDR)
	}
	if err != nil {
		return
	}
	w.line(0, "Non-terminated Pods:\t(%d in total)\n", len(running))
	w.line(1, "Namespace\tName\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
	w.line(1, "---------\t----\t------------\t----------\t---------------\t-------------\t---\n")
	totalReq, totalLim := api.ResourceList{}, api.ResourceList{}
	alloc := n.Status.Allocatable
	for _, p := range running {
		req, lim := podRequestsLimits(p)
		addResources(totalReq, req)
		addResources(totalLim, lim)
		w.line(1, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name,
			withPercent(req, alloc, api.ResourceCPU), withPercent(lim, alloc, api.ResourceCPU),
			withPercent(req, alloc, api.ResourceMemory), withPercent(lim, alloc, api.ResourceMemory),
			age(now, p.CreationTimestamp.Time))
	}
	w.line(0, "Allocated resources:\n")
	w.line(1, "(Total limits may be over 100 percent, i.e., overcommitted.)\n")
	w.line(1, "Resource\tRequests\tLimits\n")
	w.line(1, "--------\t--------\t------\n")
	names := []string{api.ResourceCPU, api.ResourceMemory}
	for _, k := range sortedKeys(alloc) {
		if k != api.ResourceCPU && k != api.ResourceMemory && k != api.ResourcePods {
			names = append(names, k)
		}
	}
	for _, k := range names {
		if k == api.ResourceCPU || k == api.ResourceMemory {
			w.line(1, "%s\t%s\t%s\n", k, withPercent(totalReq, alloc, k), withPercent(totalLim, alloc, k))
		} else {
			w.line(1, "%s\t%s\t%s\n", k, quantityOr0(totalReq, k), quantityOr0(totalLim, k))
		}
	}
}

// podRequestsLimits sums a pod's container requests and limits; a request
// not given defaults to its limit, as in Kubernetes.
func podRequestsLimits(p *api.Pod) (api.ResourceList, api.ResourceList) {
	req, lim := api.ResourceList{}, api.ResourceList{}
	for _, c := range p.Spec.Containers {
		addResources(lim, c.Resources.Limits)
		r := api.ResourceList{}
		for k, v := range c.Resources.Limits {
			r[k] = v.DeepCopy()
		}
		for k, v := range c.Resources.Requests {
			r[k] = v.DeepCopy()
		}
		addResources(req, r)
	}
	return req, lim
}

// addResources adds add into into; totals saturate (api.AddResourceLists).
func addResources(into, add api.ResourceList) { api.AddResourceLists(into, add) }

func quantityOr0(rl api.ResourceList, k string) string {
	q, ok := rl[k]
	if !ok {
		return "0"
	}
	return q.String()
}

// withPercent is "250m (12%)", relative to allocatable (in float64 near
// the int64 bound, where × 100 would overflow).
func withPercent(rl, alloc api.ResourceList, k string) string {
	a, ok := alloc[k]
	if !ok || a.Sign() <= 0 {
		return quantityOr0(rl, k)
	}
	qa, _ := api.ResourceAmount(k, rl[k])
	aa, _ := api.ResourceAmount(k, a)
	pct := int64(float64(qa) / float64(aa) * 100)
	if qa >= 0 && qa <= math.MaxInt64/100 {
		pct = qa * 100 / aa
	}
	return fmt.Sprintf("%s (%d%%)", quantityOr0(rl, k), pct)
}

// describeSimulatedProbes says, for a pod with probes on a simulated node,
// that its probe results are simulated: no process runs there to answer.
func describeSimulatedProbes(ctx context.Context, w *describeWriter, cl client.Interface, p *api.Pod) {
	probes := false
	for _, c := range p.Spec.Containers {
		probes = probes || c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil
	}
	if !probes || p.Spec.NodeName == "" {
		return
	}
	o, err := cl.Get(ctx, api.MustKindOf(&api.Node{}), "", p.Spec.NodeName)
	if err != nil || o.(*api.Node).Labels[api.LabelSkiffSimulated] != "true" {
		return
	}
	fails := "none"
	if f := api.SimulatedProbeFailures(p.Annotations); len(f) > 0 {
		fails = strings.Join(slices.Sorted(maps.Keys(f)), ", ")
	}
	w.line(0, "Probes:\tsimulated (node %s runs no processes: probes pass unless annotation %s names them; failing: %s)\n",
		p.Spec.NodeName, api.AnnotationSimulatedProbeFailure, fails)
}
