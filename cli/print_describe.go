package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
)

// describeWriter writes kubectl describe's indented "Key:\tvalue" lines;
// a tabwriter lines up the values of consecutive lines.
type describeWriter struct{ tw *tabwriter.Writer }

func newDescribeWriter(out io.Writer) *describeWriter {
	return &describeWriter{tw: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
}

// line writes format at an indent of two spaces per level.
func (w *describeWriter) line(level int, format string, args ...any) {
	fmt.Fprintf(w.tw, strings.Repeat("  ", level)+format, args...)
}

// Flush writes what is buffered.
func (w *describeWriter) Flush() error { return w.tw.Flush() }

// describeTime is kubectl's describe timestamp: RFC 1123 with a numeric zone.
func describeTime(t time.Time) string {
	if t.IsZero() {
		return "<unset>"
	}
	return t.Format(time.RFC1123Z)
}

// printMap writes "Title:\tk=v" then "\tk=v" lines (sep "=" or ": "), or "<none>".
func (w *describeWriter) printMap(level int, title string, m map[string]string, sep string, skip ...string) {
	keys := sortedKeys(m)
	var shown []string
	for _, k := range keys {
		skipped := false
		for _, s := range skip {
			skipped = skipped || s == k
		}
		if !skipped {
			shown = append(shown, k)
		}
	}
	if len(shown) == 0 {
		w.line(level, "%s:\t<none>\n", title)
		return
	}
	for i, k := range shown {
		v := m[k]
		if sep != "=" && len(v) > 140 {
			v = v[:137] + "..."
		}
		if i == 0 {
			w.line(level, "%s:\t%s%s%s\n", title, k, sep, v)
		} else {
			w.line(level, "\t%s%s%s\n", k, sep, v)
		}
	}
}

func (w *describeWriter) labels(level int, m map[string]string) { w.printMap(level, "Labels", m, "=") }

func (w *describeWriter) annotations(level int, m map[string]string) {
	w.printMap(level, "Annotations", m, ": ", "kubectl.kubernetes.io/last-applied-configuration")
}

// objectHeader writes Name, Namespace, Labels and Annotations.
func (w *describeWriter) objectHeader(m *api.ObjectMeta, namespaced bool) {
	w.line(0, "Name:\t%s\n", m.Name)
	if namespaced {
		w.line(0, "Namespace:\t%s\n", m.Namespace)
	}
	w.labels(0, m.Labels)
	w.annotations(0, m.Annotations)
}

// printEvents writes kubectl's Events table, or "Events:  <none>".
func printEvents(w *describeWriter, events []*api.Event, now time.Time) {
	if len(events) == 0 {
		w.line(0, "Events:\t<none>\n")
		return
	}
	sort.SliceStable(events, func(i, j int) bool { return table.EventLastSeen(events[i]).Before(table.EventLastSeen(events[j])) })
	w.line(0, "Events:\n")
	w.line(1, "Type\tReason\tAge\tFrom\tMessage\n")
	w.line(1, "----\t------\t----\t----\t-------\n")
	for _, e := range events {
		a := shortAge(now, table.EventLastSeen(e))
		if e.Count > 1 {
			first := e.FirstTimestamp.Time
			if first.IsZero() {
				first = table.EventLastSeen(e)
			}
			a = fmt.Sprintf("%s (x%d over %s)", a, e.Count, shortAge(now, first))
		}
		w.line(1, "%s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, a, table.EventSource(e), strings.TrimSpace(e.Message))
	}
}

// printPodTemplate writes a "Pod Template:" section (deployments, replica sets, rollout history).
func printPodTemplate(w *describeWriter, level int, t api.PodTemplateSpec) {
	w.line(level, "Pod Template:\n")
	w.labels(level+1, t.Labels)
	if len(t.Annotations) > 0 {
		w.annotations(level+1, t.Annotations)
	}
	printContainers(w, level+1, "Containers", t.Spec.Containers, nil, time.Time{})
	printVolumes(w, level+1, t.Spec.Volumes)
	if len(t.Spec.NodeSelector) > 0 {
		w.printMap(level+1, "Node-Selectors", t.Spec.NodeSelector, "=")
	}
	if len(t.Spec.Tolerations) > 0 {
		printTolerations(w, level+1, t.Spec.Tolerations)
	}
}

// printContainers writes one block per container; statuses may be nil.
func printContainers(w *describeWriter, level int, title string, cs []api.Container, statuses []api.ContainerStatus, now time.Time) {
	if len(cs) == 0 {
		return
	}
	w.line(level, "%s:\n", title)
	for _, c := range cs {
		var st *api.ContainerStatus
		for i := range statuses {
			if statuses[i].Name == c.Name {
				st = &statuses[i]
			}
		}
		w.line(level+1, "%s:\n", c.Name)
		l := level + 2
		if st != nil {
			w.line(l, "Container ID:\t%s\n", st.ContainerID)
		}
		w.line(l, "Image:\t%s\n", c.Image)
		if st != nil {
			w.line(l, "Image ID:\t%s\n", st.ImageID)
		}
		if len(c.Ports) == 0 {
			w.line(l, "Port:\t<none>\n")
			w.line(l, "Host Port:\t<none>\n")
		} else {
			var ports, hostPorts []string
			for _, p := range c.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = "TCP"
				}
				ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, proto))
				hostPorts = append(hostPorts, fmt.Sprintf("%d/%s", p.HostPort, proto))
			}
			name := "Port"
			if len(ports) > 1 {
				name = "Ports"
			}
			w.line(l, "%s:\t%s\n", name, strings.Join(ports, ", "))
			w.line(l, "Host %s:\t%s\n", name, strings.Join(hostPorts, ", "))
		}
		if len(c.Command) > 0 {
			w.line(l, "Command:\n")
			for _, s := range c.Command {
				w.line(l+1, "%s\n", s)
			}
		}
		if len(c.Args) > 0 {
			w.line(l, "Args:\n")
			for _, s := range c.Args {
				w.line(l+1, "%s\n", s)
			}
		}
		if st != nil {
			printContainerState(w, l, "State", st.State)
			if st.LastTerminationState.Terminated != nil || st.LastTerminationState.Waiting != nil || st.LastTerminationState.Running != nil {
				printContainerState(w, l, "Last State", st.LastTerminationState)
			}
			w.line(l, "Ready:\t%s\n", boolTitle(st.Ready))
			w.line(l, "Restart Count:\t%d\n", st.RestartCount)
		}
		printResources(w, l, "Limits", c.Resources.Limits)
		printResources(w, l, "Requests", c.Resources.Requests)
		if st != nil && len(st.AllocatedResources) > 0 {
			printResources(w, l, "Allocated", st.AllocatedResources)
		}
		printProbe(w, l, "Liveness", c.LivenessProbe)
		printProbe(w, l, "Readiness", c.ReadinessProbe)
		printProbe(w, l, "Startup", c.StartupProbe)
		printEnv(w, l, c)
		if len(c.VolumeMounts) == 0 {
			w.line(l, "Mounts:\t<none>\n")
		} else {
			w.line(l, "Mounts:\n")
			for _, m := range c.VolumeMounts {
				flags := "rw"
				if m.ReadOnly {
					flags = "ro"
				}
				if m.SubPath != "" {
					flags += fmt.Sprintf(",path=%q", m.SubPath)
				}
				w.line(l+1, "%s from %s (%s)\n", m.MountPath, m.Name, flags)
			}
		}
	}
}

func boolTitle(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func printContainerState(w *describeWriter, level int, title string, s api.ContainerState) {
	switch {
	case s.Running != nil:
		w.line(level, "%s:\tRunning\n", title)
		w.line(level+1, "Started:\t%s\n", describeTime(s.Running.StartedAt.Time))
	case s.Waiting != nil:
		w.line(level, "%s:\tWaiting\n", title)
		if s.Waiting.Reason != "" {
			w.line(level+1, "Reason:\t%s\n", s.Waiting.Reason)
		}
		if s.Waiting.Message != "" {
			w.line(level+1, "Message:\t%s\n", s.Waiting.Message)
		}
	case s.Terminated != nil:
		t := s.Terminated
		w.line(level, "%s:\tTerminated\n", title)
		if t.Reason != "" {
			w.line(level+1, "Reason:\t%s\n", t.Reason)
		}
		if t.Message != "" {
			w.line(level+1, "Message:\t%s\n", t.Message)
		}
		w.line(level+1, "Exit Code:\t%d\n", t.ExitCode)
		if t.Signal != 0 {
			w.line(level+1, "Signal:\t%d\n", t.Signal)
		}
		w.line(level+1, "Started:\t%s\n", describeTime(t.StartedAt.Time))
		w.line(level+1, "Finished:\t%s\n", describeTime(t.FinishedAt.Time))
	default:
		w.line(level, "%s:\tWaiting\n", title)
	}
}

func printResources(w *describeWriter, level int, title string, rl api.ResourceList) {
	if len(rl) == 0 {
		return
	}
	w.line(level, "%s:\n", title)
	for _, k := range sortedKeys(rl) {
		q := rl[k]
		w.line(level+1, "%s:\t%s\n", k, q.String())
	}
}

func printProbe(w *describeWriter, level int, title string, p *api.Probe) {
	if p == nil {
		return
	}
	var what string
	switch {
	case p.HTTPGet != nil:
		scheme := strings.ToLower(p.HTTPGet.Scheme)
		if scheme == "" {
			scheme = "http"
		}
		what = fmt.Sprintf("http-get %s://%s:%s%s", scheme, p.HTTPGet.Host, p.HTTPGet.Port.String(), p.HTTPGet.Path)
	case p.TCPSocket != nil:
		what = fmt.Sprintf("tcp-socket %s:%s", p.TCPSocket.Host, p.TCPSocket.Port.String())
	case p.Exec != nil:
		what = fmt.Sprintf("exec %v", p.Exec.Command)
	default:
		what = "unknown"
	}
	w.line(level, "%s:\t%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d\n", title, what,
		p.InitialDelaySeconds, defaultInt(p.TimeoutSeconds, 1), defaultInt(p.PeriodSeconds, 10),
		defaultInt(p.SuccessThreshold, 1), defaultInt(p.FailureThreshold, 3))
}

func defaultInt(v, d int32) int32 {
	if v == 0 {
		return d
	}
	return v
}

func printEnv(w *describeWriter, level int, c api.Container) {
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			w.line(level, "Environment Variables from:\n")
			w.line(level+1, "%s\tConfigMap with prefix '%s'\tOptional: %v\n", ef.ConfigMapRef.Name, ef.Prefix, ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional)
		}
		if ef.SecretRef != nil {
			w.line(level, "Environment Variables from:\n")
			w.line(level+1, "%s\tSecret with prefix '%s'\tOptional: %v\n", ef.SecretRef.Name, ef.Prefix, ef.SecretRef.Optional != nil && *ef.SecretRef.Optional)
		}
	}
	if len(c.Env) == 0 {
		w.line(level, "Environment:\t<none>\n")
		return
	}
	w.line(level, "Environment:\n")
	for _, e := range c.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			w.line(level+1, "%s:\t%s\n", e.Name, e.Value)
		case vf.FieldRef != nil:
			w.line(level+1, "%s:\t (v1:%s)\n", e.Name, vf.FieldRef.FieldPath)
		case vf.ResourceFieldRef != nil:
			w.line(level+1, "%s:\t%s (%s)\n", e.Name, vf.ResourceFieldRef.Resource, vf.ResourceFieldRef.ContainerName)
		case vf.ConfigMapKeyRef != nil:
			w.line(level+1, "%s:\t<set to the key '%s' of config map '%s'>\n", e.Name, vf.ConfigMapKeyRef.Key, vf.ConfigMapKeyRef.Name)
		case vf.SecretKeyRef != nil:
			w.line(level+1, "%s:\t<set to the key '%s' in secret '%s'>\n", e.Name, vf.SecretKeyRef.Key, vf.SecretKeyRef.Name)
		}
	}
}

func printVolumes(w *describeWriter, level int, vols []api.Volume) {
	if len(vols) == 0 {
		w.line(level, "Volumes:\t<none>\n")
		return
	}
	w.line(level, "Volumes:\n")
	for _, v := range vols {
		w.line(level+1, "%s:\n", v.Name)
		l := level + 2
		switch {
		case v.ConfigMap != nil:
			w.line(l, "Type:\tConfigMap (a volume populated by a ConfigMap)\n")
			w.line(l, "Name:\t%s\n", v.ConfigMap.Name)
			w.line(l, "Optional:\t%v\n", v.ConfigMap.Optional != nil && *v.ConfigMap.Optional)
		case v.Secret != nil:
			w.line(l, "Type:\tSecret (a volume populated by a Secret)\n")
			w.line(l, "SecretName:\t%s\n", v.Secret.SecretName)
			w.line(l, "Optional:\t%v\n", v.Secret.Optional != nil && *v.Secret.Optional)
		case v.EmptyDir != nil:
			w.line(l, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n")
			w.line(l, "Medium:\t%s\n", v.EmptyDir.Medium)
			if v.EmptyDir.SizeLimit != nil {
				w.line(l, "SizeLimit:\t%s\n", v.EmptyDir.SizeLimit.String())
			} else {
				w.line(l, "SizeLimit:\t<unset>\n")
			}
		case v.HostPath != nil:
			w.line(l, "Type:\tHostPath (bare host directory volume)\n")
			w.line(l, "Path:\t%s\n", v.HostPath.Path)
			typ := ""
			if v.HostPath.Type != nil {
				typ = *v.HostPath.Type
			}
			w.line(l, "HostPathType:\t%s\n", typ)
		default:
			w.line(l, "Type:\t<unknown>\n")
		}
	}
}

func printTolerations(w *describeWriter, level int, ts []api.Toleration) {
	if len(ts) == 0 {
		w.line(level, "Tolerations:\t<none>\n")
		return
	}
	for i, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + t.Effect
		}
		if t.Operator == "Exists" && t.Value == "" {
			s += " op=Exists"
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		if s == " op=Exists" {
			s = "op=Exists"
		}
		if i == 0 {
			w.line(level, "Tolerations:\t%s\n", s)
		} else {
			w.line(level, "\t%s\n", s)
		}
	}
}

func printTaints(w *describeWriter, ts []api.Taint) {
	if len(ts) == 0 {
		w.line(0, "Taints:\t<none>\n")
		return
	}
	for i, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + t.Effect
		if i == 0 {
			w.line(0, "Taints:\t%s\n", s)
		} else {
			w.line(0, "\t%s\n", s)
		}
	}
}
