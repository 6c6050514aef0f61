package api

import (
	"fmt"
	"math"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// supportedFieldRefs are the pod fields an env var's fieldRef may read.
var supportedFieldRefs = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
	"spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.hostIP", "status.podIPs", "status.hostIPs",
}

// supportedResourceFieldRefs are what resourceFieldRef may read.
var supportedResourceFieldRefs = []string{
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
}

func validatePodSpec(s *PodSpec, p string) FieldErrors {
	errs := validatePodResourceClaims(s, p) // validate_resource.go
	volumes := map[string]bool{}
	for i, v := range s.Volumes {
		vp := elemPath(p, ".volumes", i)
		if v.Name == "" {
			errs = append(errs, Required(vp+".name", ""))
		} else {
			for _, msg := range isDNS1123Label(v.Name) {
				errs = append(errs, Invalid(vp+".name", v.Name, msg))
			}
			if volumes[v.Name] {
				errs = append(errs, Duplicate(vp+".name", v.Name))
			}
			volumes[v.Name] = true
		}
		errs = append(errs, validateVolumeSource(&v, vp)...)
	}
	if len(s.Containers) == 0 {
		errs = append(errs, Required(p+".containers", ""))
	}
	names := map[string]bool{}
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], elemPath(p, ".initContainers", i), s, volumes, names)...)
		if c := &s.InitContainers[i]; c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			errs = append(errs, Forbidden(elemPath(p, ".initContainers", i), "may not set probes on init containers"))
		}
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], elemPath(p, ".containers", i), s, volumes, names)...)
	}
	for i := range s.EphemeralContainers {
		errs = append(errs, validateEphemeralContainer(&s.EphemeralContainers[i], elemPath(p, ".ephemeralContainers", i), s, volumes, names)...)
	}
	errs = append(errs, validatePodTotals(s, p)...)
	errs = append(errs, validatePodSecurity(s.SecurityContext, s.HostNetwork, p+".securityContext")...) // security.go
	switch s.RestartPolicy {
	case "", RestartAlways, RestartOnFailure, RestartNever:
	default:
		errs = append(errs, NotSupported(p+".restartPolicy", s.RestartPolicy, RestartAlways, RestartOnFailure, RestartNever))
	}
	errs = append(errs, validatePodDNS(s, p)...) // dns.go
	if s.TerminationGracePeriodSeconds != nil {
		errs = append(errs, nonNegative(*s.TerminationGracePeriodSeconds, p+".terminationGracePeriodSeconds")...)
	}
	if a := s.ActiveDeadlineSeconds; a != nil && (*a < 1 || *a > 1<<31-1) {
		errs = append(errs, Invalid(p+".activeDeadlineSeconds", *a, "must be between 1 and 2147483647, inclusive"))
	}
	errs = append(errs, validateLabels(s.NodeSelector, p+".nodeSelector")...)
	if s.NodeName != "" {
		for _, msg := range isDNS1123Subdomain(s.NodeName) {
			errs = append(errs, Invalid(p+".nodeName", s.NodeName, msg))
		}
	}
	if s.Subdomain != "" {
		for _, msg := range isDNS1123Label(s.Subdomain) {
			errs = append(errs, Invalid(p+".subdomain", s.Subdomain, msg))
		}
	}
	if s.Hostname != "" {
		for _, msg := range isDNS1123Label(s.Hostname) {
			errs = append(errs, Invalid(p+".hostname", s.Hostname, msg))
		}
	}
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil {
		errs = append(errs, validateNodeAffinity(s.Affinity.NodeAffinity, p+".affinity.nodeAffinity")...)
	}
	if s.Affinity != nil && s.Affinity.PodAffinity != nil {
		pa := s.Affinity.PodAffinity
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p+".affinity.podAffinity")...)
	}
	if s.Affinity != nil && s.Affinity.PodAntiAffinity != nil {
		pa := s.Affinity.PodAntiAffinity
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p+".affinity.podAntiAffinity")...)
	}
	errs = append(errs, validateTopologySpread(s.TopologySpreadConstraints, p+".topologySpreadConstraints")...)
	for i, t := range s.Tolerations {
		errs = append(errs, validateToleration(t, elemPath(p, ".tolerations", i))...)
	}
	if s.SchedulerName != "" {
		for _, msg := range isDNS1123Subdomain(s.SchedulerName) {
			errs = append(errs, Invalid(p+".schedulerName", s.SchedulerName, msg))
		}
	}
	if s.ServiceAccountName != "" {
		for _, msg := range isDNS1123Subdomain(s.ServiceAccountName) {
			errs = append(errs, Invalid(p+".serviceAccountName", s.ServiceAccountName, msg))
		}
	}
	if s.PriorityClassName != "" {
		for _, msg := range isDNS1123Subdomain(s.PriorityClassName) {
			errs = append(errs, Invalid(p+".priorityClassName", s.PriorityClassName, msg))
		}
	}
	if pp := s.PreemptionPolicy; pp != nil && *pp != "PreemptLowerPriority" && *pp != "Never" {
		errs = append(errs, NotSupported(p+".preemptionPolicy", *pp, "Never", "PreemptLowerPriority"))
	}
	return errs
}

func validateVolumeSource(v *Volume, vp string) FieldErrors {
	var errs FieldErrors
	n := 0
	if v.ConfigMap != nil {
		n++
		if n == 1 {
			cm := v.ConfigMap
			if cm.Name == "" {
				errs = append(errs, Required(vp+".configMap.name", ""))
			}
			errs = append(errs, validateKeyToPaths(cm.Items, cm.DefaultMode, vp+".configMap")...)
		}
	}
	if v.Secret != nil {
		n++
		if n == 1 {
			sv := v.Secret
			if sv.SecretName == "" {
				errs = append(errs, Required(vp+".secret.secretName", ""))
			}
			errs = append(errs, validateKeyToPaths(sv.Items, sv.DefaultMode, vp+".secret")...)
		}
	}
	if v.EmptyDir != nil {
		n++
		if n == 1 {
			if m := v.EmptyDir.Medium; m != "" && m != "Memory" {
				errs = append(errs, NotSupported(vp+".emptyDir.medium", m, "", "Memory"))
			}
			if q := v.EmptyDir.SizeLimit; q != nil {
				errs = append(errs, validateResourceQuantity(ResourceMemory, *q, vp+".emptyDir.sizeLimit")...) // bytes
			}
		}
	}
	if v.HostPath != nil {
		n++
		if n == 1 {
			if v.HostPath.Path == "" {
				errs = append(errs, Required(vp+".hostPath.path", ""))
			}
			errs = append(errs, noBacksteps(v.HostPath.Path, vp+".hostPath.path")...)
			if t := v.HostPath.Type; t != nil {
				switch *t {
				case "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice":
				default:
					errs = append(errs, NotSupported(vp+".hostPath.type", *t, "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"))
				}
			}
		}
	}
	if v.Projected != nil {
		n++
		if n == 1 {
			errs = append(errs, validateProjected(v.Projected, vp+".projected")...) // serviceaccount.go
		}
	}
	if v.PersistentVolumeClaim != nil {
		n++
		if n == 1 && v.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, Required(vp+".persistentVolumeClaim.claimName", ""))
		}
	}
	switch {
	case n == 0:
		errs = append(errs, Required(vp, "must specify a volume type"))
	case n > 1:
		errs = append(errs, Forbidden(vp, "may not specify more than 1 volume type"))
	}
	return errs
}

func validateMode(m *int32, path string) FieldErrors {
	if m != nil && (*m < 0 || *m > 0o777) {
		return FieldErrors{Invalid(path, *m, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// validateKeyToPaths checks a volume's items. Every pod's API access
// volume has some: an item's field path is only joined for an error.
func validateKeyToPaths(items []KeyToPath, mode *int32, p string) FieldErrors {
	var errs FieldErrors
	if mode != nil {
		errs = validateMode(mode, p+".defaultMode")
	}
	for i, it := range items {
		ip := func() string { return elemPath(p, ".items", i) }
		if it.Key == "" {
			errs = append(errs, Required(ip()+".key", ""))
		}
		if it.Path == "" {
			errs = append(errs, Required(ip()+".path", ""))
		} else if !isLocalPath(it.Path) {
			errs = append(errs, validateLocalPath(it.Path, ip()+".path")...)
		}
		if it.Mode != nil {
			errs = append(errs, validateMode(it.Mode, ip()+".mode")...)
		}
	}
	return errs
}

// validateLocalPath: relative, without "..".
func validateLocalPath(p, field string) FieldErrors {
	var errs FieldErrors
	if path.IsAbs(p) {
		errs = append(errs, Invalid(field, p, "must be a relative path"))
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			errs = append(errs, Invalid(field, p, "must not contain '..'"))
			break
		}
	}
	return errs
}

// isLocalPath reports whether validateLocalPath finds nothing wrong with p
// (without a field path to join).
func isLocalPath(p string) bool { return len(validateLocalPath(p, "")) == 0 }

// validateEphemeralContainer: a container (names unique among all the
// pod's), without what a pod's service may rely on: Kubernetes' words for
// each field set ("cannot be set for an Ephemeral Container").
func validateEphemeralContainer(ec *EphemeralContainer, ep string, spec *PodSpec, volumes, names map[string]bool) FieldErrors {
	// targetContainerName is refused by the decoder (strict.go).
	errs := validateContainer(&ec.Container, ep, spec, volumes, names)
	const why = "cannot be set for an Ephemeral Container"
	c := &ec.Container
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"ports", len(c.Ports) > 0},
		{"resources", !reflect.DeepEqual(c.Resources, ResourceRequirements{})},
		{"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil},
	} {
		if f.set {
			errs = append(errs, Forbidden(ep+"."+f.name, why))
		}
	}
	return errs
}

func validateContainer(c *Container, cp string, spec *PodSpec, volumes, names map[string]bool) FieldErrors {
	var errs FieldErrors
	if c.Name == "" {
		errs = append(errs, Required(cp+".name", ""))
	} else {
		for _, msg := range isDNS1123Label(c.Name) {
			errs = append(errs, Invalid(cp+".name", c.Name, msg))
		}
		if names[c.Name] {
			errs = append(errs, Duplicate(cp+".name", c.Name))
		}
		names[c.Name] = true
	}
	errs = append(errs, validateContainerSecurity(c.SecurityContext, cp+".securityContext")...) // security.go
	if c.Image == "" {
		errs = append(errs, Required(cp+".image", ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, Invalid(cp+".image", c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case "", PullAlways, PullIfNotPresent, PullNever:
	default:
		errs = append(errs, NotSupported(cp+".imagePullPolicy", c.ImagePullPolicy, PullAlways, PullIfNotPresent, PullNever))
	}
	if c.TerminationMessagePath != "" && c.TerminationMessagePath != DefaultTerminationMessagePath {
		errs = append(errs, NotSupported(cp+".terminationMessagePath", c.TerminationMessagePath, DefaultTerminationMessagePath))
	}
	if c.TerminationMessagePolicy != "" && c.TerminationMessagePolicy != DefaultTerminationMessagePolicy {
		errs = append(errs, NotSupported(cp+".terminationMessagePolicy", c.TerminationMessagePolicy, DefaultTerminationMessagePolicy))
	}
	portNames := map[string]bool{}
	for i, port := range c.Ports {
		pp := elemPath(cp, ".ports", i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, Invalid(pp+".name", port.Name, msg))
			}
			if portNames[port.Name] {
				errs = append(errs, Duplicate(pp+".name", port.Name))
			}
			portNames[port.Name] = true
		}
		errs = append(errs, validatePortNum(int64(port.ContainerPort), pp+".containerPort")...)
		if port.HostPort != 0 {
			errs = append(errs, validatePortNum(int64(port.HostPort), pp+".hostPort")...)
			if spec.HostNetwork && port.HostPort != port.ContainerPort {
				errs = append(errs, Invalid(pp+".containerPort", port.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
			}
		}
		switch port.Protocol {
		case "", ProtocolTCP, ProtocolUDP:
		default:
			errs = append(errs, NotSupported(pp+".protocol", port.Protocol, ProtocolTCP, ProtocolUDP))
		}
	}
	for i, e := range c.Env {
		errs = append(errs, validateEnvVar(e, elemPath(cp, ".env", i), spec)...)
	}
	for i, e := range c.EnvFrom {
		ep := elemPath(cp, ".envFrom", i)
		if e.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Prefix) {
				errs = append(errs, Invalid(ep+".prefix", e.Prefix, msg))
			}
		}
		switch {
		case e.ConfigMapRef != nil && e.SecretRef != nil:
			errs = append(errs, Invalid(ep, "", "may not have more than one field specified at a time"))
		case e.ConfigMapRef != nil:
			if e.ConfigMapRef.Name == "" {
				errs = append(errs, Required(ep+".configMapRef.name", ""))
			}
		case e.SecretRef != nil:
			if e.SecretRef.Name == "" {
				errs = append(errs, Required(ep+".secretRef.name", ""))
			}
		default:
			errs = append(errs, Invalid(ep, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	errs = append(errs, validateResources(&c.Resources, cp+".resources")...)
	mountPaths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		mp := elemPath(cp, ".volumeMounts", i)
		if m.Name == "" {
			errs = append(errs, Required(mp+".name", ""))
		} else if !volumes[m.Name] {
			errs = append(errs, NotFound(mp+".name", m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, Required(mp+".mountPath", ""))
		} else {
			if mountPaths[m.MountPath] {
				errs = append(errs, Invalid(mp+".mountPath", m.MountPath, "must be unique"))
			}
			mountPaths[m.MountPath] = true
		}
		if m.SubPath != "" {
			errs = append(errs, validateLocalPath(m.SubPath, mp+".subPath")...)
		}
	}
	errs = append(errs, validateProbe(c.LivenessProbe, cp+".livenessProbe", true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, cp+".readinessProbe", false)...)
	errs = append(errs, validateProbe(c.StartupProbe, cp+".startupProbe", true)...)
	return errs
}

func validateEnvVar(e EnvVar, ep string, spec *PodSpec) FieldErrors {
	var errs FieldErrors
	if e.Name == "" {
		errs = append(errs, Required(ep+".name", ""))
	} else {
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, Invalid(ep+".name", e.Name, msg))
		}
	}
	vf := e.ValueFrom
	if vf == nil {
		return errs
	}
	vp := ep + ".valueFrom"
	n := 0
	if vf.FieldRef != nil {
		n++
		f := vf.FieldRef
		if f.FieldPath == "" {
			errs = append(errs, Required(vp+".fieldRef.fieldPath", ""))
		} else if !supportedFieldRef(f.FieldPath) {
			errs = append(errs, NotSupported(vp+".fieldRef.fieldPath", f.FieldPath, supportedFieldRefs...))
		}
		if f.APIVersion != "" && f.APIVersion != "v1" {
			errs = append(errs, NotSupported(vp+".fieldRef.apiVersion", f.APIVersion, "v1"))
		}
	}
	if vf.ResourceFieldRef != nil {
		n++
		r := vf.ResourceFieldRef
		ok := false
		for _, s := range supportedResourceFieldRefs {
			ok = ok || r.Resource == s
		}
		if r.Resource == "" {
			errs = append(errs, Required(vp+".resourceFieldRef.resource", ""))
		} else if !ok {
			errs = append(errs, NotSupported(vp+".resourceFieldRef.resource", r.Resource, supportedResourceFieldRefs...))
		}
		if r.ContainerName != "" && !hasContainer(spec, r.ContainerName) {
			errs = append(errs, NotFound(vp+".resourceFieldRef.containerName", r.ContainerName))
		}
		if r.Divisor != nil && r.Divisor.Sign() <= 0 {
			errs = append(errs, Invalid(vp+".resourceFieldRef.divisor", r.Divisor.String(), "must be greater than 0"))
		} else if r.Divisor != nil && ok {
			errs = append(errs, validateDivisor(r.Resource, *r.Divisor, vp+".resourceFieldRef.divisor")...)
		}
	}
	for _, ks := range []struct {
		sel  *KeySelector
		name string
	}{{vf.ConfigMapKeyRef, "configMapKeyRef"}, {vf.SecretKeyRef, "secretKeyRef"}} {
		if ks.sel == nil {
			continue
		}
		n++
		kp := vp + "." + ks.name
		if ks.sel.Name == "" {
			errs = append(errs, Required(kp+".name", ""))
		}
		if ks.sel.Key == "" {
			errs = append(errs, Required(kp+".key", ""))
		} else {
			for _, msg := range validation.IsConfigMapKey(ks.sel.Key) {
				errs = append(errs, Invalid(kp+".key", ks.sel.Key, msg))
			}
		}
	}
	switch {
	case n == 0:
		errs = append(errs, Invalid(vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case n > 1:
		errs = append(errs, Invalid(vp, "", "may not have more than one field specified at a time"))
	}
	if e.Value != "" {
		errs = append(errs, Invalid(vp, "", "may not be specified when `value` is not empty"))
	}
	return errs
}

// supportedFieldRef accepts the listed paths and metadata.labels['key'] /
// metadata.annotations['key'].
func supportedFieldRef(p string) bool {
	for _, s := range supportedFieldRefs {
		if p == s {
			return true
		}
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && strings.HasSuffix(rest, "']") && len(rest) > 2 {
			return true
		}
	}
	return false
}

func hasContainer(s *PodSpec, name string) bool {
	for _, c := range s.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range s.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func validateResourceName(name, path string) FieldErrors {
	if isStandardResource(name) {
		return nil
	}
	if !strings.Contains(name, "/") {
		return FieldErrors{Invalid(path, name, "must be a standard resource type or fully qualified")}
	}
	var errs FieldErrors
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, Invalid(path, name, msg))
	}
	return errs
}

func validateResources(r *ResourceRequirements, rp string) FieldErrors {
	var errs FieldErrors
	check := func(list ResourceList, lp string) {
		for _, name := range sortedKeys(list) {
			q := list[name]
			fp := lp + "[" + name + "]"
			errs = append(errs, validateResourceName(name, fp)...)
			errs = append(errs, validateResourceQuantity(name, q, fp)...)
		}
	}
	check(r.Limits, rp+".limits")
	check(r.Requests, rp+".requests")
	for _, name := range sortedKeys(r.Requests) {
		req := r.Requests[name]
		lim, hasLim := r.Limits[name]
		fp := rp + ".requests[" + name + "]"
		if isExtendedResource(name) {
			// Extended resources cannot be overcommitted: a request needs
			// an equal limit.
			if !hasLim {
				errs = append(errs, Required(rp+".limits["+name+"]", "Limit must be set for non overcommitable resources"))
			} else if req.Cmp(lim) != 0 {
				errs = append(errs, Invalid(fp, req.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			}
			continue
		}
		if hasLim && req.Cmp(lim) > 0 {
			errs = append(errs, Invalid(fp, req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

// validatePodTotals rejects a pod whose containers together ask for more
// of a resource than an amount holds (ResourceAmount): the scheduler and
// describe node add them up. Each container's request is its limit when it
// gives none, as the scheduler counts it. Init containers run one at a time
// and are counted by their largest, which cannot overflow.
func validatePodTotals(s *PodSpec, p string) FieldErrors {
	var errs FieldErrors
	reported := map[string]bool{} // a request that is its limit: said once, as a limit
	for _, kind := range []string{"limit", "request"} {
		total := map[string]int64{}
		full := map[string]bool{} // reported once per resource
		for i := range s.Containers {
			r := &s.Containers[i].Resources
			names := sortedKeys(r.Limits)
			if kind == "request" {
				names = sortedKeys(effectiveRequests(r))
			}
			for _, name := range names {
				field, q := "limits", r.Limits[name]
				if req, ok := r.Requests[name]; ok && kind == "request" {
					field, q = "requests", req
				}
				a, ok := ResourceAmount(name, q)
				if !ok || a < 0 || full[name] {
					continue // out of range or negative: reported on its own
				}
				if a > math.MaxInt64-total[name] {
					fp := fmt.Sprintf("%s.containers[%d].resources.%s[%s]", p, i, field, name)
					if !reported[fp] {
						errs = append(errs, Invalid(fp, q.String(),
							fmt.Sprintf("the containers' total %s %s would be more than %s", name, kind, maxQuantityString(name))))
					}
					reported[fp], full[name] = true, true
					continue
				}
				total[name] += a
			}
		}
	}
	return errs
}

// effectiveRequests is what a container requests: its requests, and its
// limit for every resource it gives no request for.
func effectiveRequests(r *ResourceRequirements) ResourceList {
	out := make(ResourceList, len(r.Limits)+len(r.Requests))
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}

func validateProbe(pr *Probe, pp string, successMustBeOne bool) FieldErrors {
	if pr == nil {
		return nil
	}
	var errs FieldErrors
	n := 0
	if pr.Exec != nil {
		n++
		if len(pr.Exec.Command) == 0 {
			errs = append(errs, Required(pp+".exec.command", ""))
		}
	}
	if h := pr.HTTPGet; h != nil {
		n++
		errs = append(errs, validatePortRef(h.Port, pp+".httpGet.port", false)...)
		if h.Scheme != "" && h.Scheme != "HTTP" && h.Scheme != "HTTPS" {
			errs = append(errs, NotSupported(pp+".httpGet.scheme", h.Scheme, "HTTP", "HTTPS"))
		}
		for i, hd := range h.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hd.Name) {
				errs = append(errs, Invalid(fmt.Sprintf("%s.httpGet.httpHeaders[%d].name", pp, i), hd.Name, msg))
			}
		}
	}
	if pr.TCPSocket != nil {
		n++
		errs = append(errs, validatePortRef(pr.TCPSocket.Port, pp+".tcpSocket.port", false)...)
	}
	switch {
	case n == 0:
		errs = append(errs, Required(pp, "must specify a handler type"))
	case n > 1:
		errs = append(errs, Forbidden(pp, "may not specify more than 1 handler type"))
	}
	for _, f := range []struct {
		v    int32
		name string
	}{{pr.InitialDelaySeconds, "initialDelaySeconds"}, {pr.TimeoutSeconds, "timeoutSeconds"}, {pr.PeriodSeconds, "periodSeconds"},
		{pr.SuccessThreshold, "successThreshold"}, {pr.FailureThreshold, "failureThreshold"}} {
		errs = append(errs, nonNegative(int64(f.v), pp+"."+f.name)...)
	}
	if successMustBeOne && pr.SuccessThreshold > 1 {
		errs = append(errs, Invalid(pp+".successThreshold", pr.SuccessThreshold, "must be 1"))
	}
	if t := pr.TerminationGracePeriodSeconds; t != nil && *t <= 0 {
		errs = append(errs, Invalid(pp+".terminationGracePeriodSeconds", *t, "must be greater than 0"))
	}
	return errs
}

func validateNodeAffinity(na *NodeAffinity, p string) FieldErrors {
	var errs FieldErrors
	if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		rp := p + ".requiredDuringSchedulingIgnoredDuringExecution"
		if len(r.NodeSelectorTerms) == 0 {
			errs = append(errs, Required(rp+".nodeSelectorTerms", "must have at least one node selector term"))
		}
		for i, t := range r.NodeSelectorTerms {
			errs = append(errs, validateNodeSelectorTerm(t, elemPath(rp, ".nodeSelectorTerms", i))...)
		}
	}
	for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		tp := elemPath(p, ".preferredDuringSchedulingIgnoredDuringExecution", i)
		if t.Weight < 1 || t.Weight > 100 {
			errs = append(errs, Invalid(tp+".weight", t.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, validateNodeSelectorTerm(t.Preference, tp+".preference")...)
	}
	return errs
}

// validatePodAffinityTerms validates pod (anti-)affinity as Kubernetes'
// validatePodAffinityTerm.
func validatePodAffinityTerms(required []PodAffinityTerm, preferred []WeightedPodAffinityTerm, p string) FieldErrors {
	var errs FieldErrors
	for i, t := range required {
		errs = append(errs, validatePodAffinityTerm(t, elemPath(p, ".requiredDuringSchedulingIgnoredDuringExecution", i))...)
	}
	for i, w := range preferred {
		wp := elemPath(p, ".preferredDuringSchedulingIgnoredDuringExecution", i)
		if w.Weight < 1 || w.Weight > 100 {
			errs = append(errs, Invalid(wp+".weight", w.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, validatePodAffinityTerm(w.PodAffinityTerm, wp+".podAffinityTerm")...)
	}
	return errs
}

func validatePodAffinityTerm(t PodAffinityTerm, p string) FieldErrors {
	var errs FieldErrors
	if t.LabelSelector != nil {
		errs = append(errs, validateLabelSelector(t.LabelSelector, p+".labelSelector")...)
	}
	if t.NamespaceSelector != nil {
		errs = append(errs, validateLabelSelector(t.NamespaceSelector, p+".namespaceSelector")...)
	}
	for i, ns := range t.Namespaces {
		for _, msg := range isDNS1123Label(ns) {
			errs = append(errs, Invalid(elemPath(p, ".namespaces", i), ns, msg))
		}
	}
	if t.TopologyKey == "" {
		errs = append(errs, Required(p+".topologyKey", "can not be empty"))
	} else {
		for _, msg := range validation.IsQualifiedName(t.TopologyKey) {
			errs = append(errs, Invalid(p+".topologyKey", t.TopologyKey, msg))
		}
	}
	errs = append(errs, validateLabelKeys(t.MatchLabelKeys, t.LabelSelector, p+".matchLabelKeys")...)
	errs = append(errs, validateLabelKeys(t.MismatchLabelKeys, t.LabelSelector, p+".mismatchLabelKeys")...)
	for i, k := range t.MatchLabelKeys {
		if slices.Contains(t.MismatchLabelKeys, k) {
			errs = append(errs, Invalid(elemPath(p, ".matchLabelKeys", i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

// validateLabelKeys checks matchLabelKeys / mismatchLabelKeys: label
// names, only beside a labelSelector, not already in its expressions.
func validateLabelKeys(keys []string, sel *LabelSelector, p string) FieldErrors {
	var errs FieldErrors
	if len(keys) > 0 && sel == nil {
		errs = append(errs, Forbidden(p, "must not be specified when labelSelector is not set"))
		return errs
	}
	for i, k := range keys {
		kp := elemPath(p, "", i)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, Invalid(kp, k, msg))
		}
		if sel == nil {
			continue
		}
		for _, e := range sel.MatchExpressions {
			if e.Key == k {
				errs = append(errs, Invalid(kp, k, "exists in both matchLabelKeys and labelSelector"))
				break
			}
		}
	}
	return errs
}

// validateTopologySpread validates topologySpreadConstraints as
// Kubernetes' validateTopologySpreadConstraints.
func validateTopologySpread(cs []TopologySpreadConstraint, p string) FieldErrors {
	var errs FieldErrors
	for i, c := range cs {
		cp := elemPath(p, "", i)
		if c.MaxSkew <= 0 {
			errs = append(errs, Invalid(cp+".maxSkew", c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, Required(cp+".topologyKey", "can not be empty"))
		} else {
			for _, msg := range validation.IsQualifiedName(c.TopologyKey) {
				errs = append(errs, Invalid(cp+".topologyKey", c.TopologyKey, msg))
			}
		}
		switch c.WhenUnsatisfiable {
		case "":
			errs = append(errs, Required(cp+".whenUnsatisfiable", "can not be empty"))
		case DoNotSchedule, ScheduleAnyway:
		default:
			errs = append(errs, NotSupported(cp+".whenUnsatisfiable", c.WhenUnsatisfiable, DoNotSchedule, ScheduleAnyway))
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				errs = append(errs, Invalid(cp+".minDomains", *c.MinDomains, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != DoNotSchedule {
				errs = append(errs, Invalid(cp+".minDomains", *c.MinDomains, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for j := range i {
			if cs[j].TopologyKey == c.TopologyKey && cs[j].WhenUnsatisfiable == c.WhenUnsatisfiable {
				errs = append(errs, Duplicate(cp, fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if v := c.NodeAffinityPolicy; v != nil && *v != PolicyHonor && *v != PolicyIgnore {
			errs = append(errs, NotSupported(cp+".nodeAffinityPolicy", *v, PolicyHonor, PolicyIgnore))
		}
		if v := c.NodeTaintsPolicy; v != nil && *v != PolicyHonor && *v != PolicyIgnore {
			errs = append(errs, NotSupported(cp+".nodeTaintsPolicy", *v, PolicyHonor, PolicyIgnore))
		}
		if c.LabelSelector != nil {
			errs = append(errs, validateLabelSelector(c.LabelSelector, cp+".labelSelector")...)
		}
		errs = append(errs, validateLabelKeys(c.MatchLabelKeys, c.LabelSelector, cp+".matchLabelKeys")...)
	}
	return errs
}

func validateNodeSelectorTerm(t NodeSelectorTerm, p string) FieldErrors {
	var errs FieldErrors
	for i, r := range t.MatchExpressions {
		rp := elemPath(p, ".matchExpressions", i)
		switch r.Operator {
		case "In", "NotIn":
			if len(r.Values) == 0 {
				errs = append(errs, Required(rp+".values", "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case "Exists", "DoesNotExist":
			if len(r.Values) > 0 {
				errs = append(errs, Forbidden(rp+".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case "Gt", "Lt":
			if len(r.Values) != 1 {
				errs = append(errs, Required(rp+".values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				errs = append(errs, Invalid(rp+".values[0]", r.Values[0], "must be an integer"))
			}
		default:
			errs = append(errs, NotSupported(rp+".operator", r.Operator, "DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"))
		}
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, Invalid(rp+".key", r.Key, msg))
		}
	}
	for i, r := range t.MatchFields {
		rp := elemPath(p, ".matchFields", i)
		if r.Key != "metadata.name" {
			errs = append(errs, NotSupported(rp+".key", r.Key, "metadata.name"))
		}
		if r.Operator != "In" && r.Operator != "NotIn" {
			errs = append(errs, NotSupported(rp+".operator", r.Operator, "In", "NotIn"))
		}
		if len(r.Values) != 1 {
			errs = append(errs, Required(rp+".values", "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	}
	return errs
}

func validateToleration(t Toleration, p string) FieldErrors {
	var errs FieldErrors
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, Invalid(p+".key", t.Key, msg))
		}
	}
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			errs = append(errs, Invalid(p+".operator", t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, Invalid(p+".value", t.Value, msg))
		}
	case "Exists":
		if t.Value != "" {
			errs = append(errs, Invalid(p+".operator", t.Value, "value must be empty when `operator` is 'Exists'"))
		}
	default:
		errs = append(errs, NotSupported(p+".operator", t.Operator, "Equal", "Exists"))
	}
	switch t.Effect {
	case "", TaintEffectNoSched, TaintEffectPrefNo, TaintEffectNoExec:
	default:
		errs = append(errs, NotSupported(p+".effect", t.Effect, TaintEffectNoExec, TaintEffectNoSched, TaintEffectPrefNo))
	}
	if t.TolerationSeconds != nil && t.Effect != TaintEffectNoExec {
		errs = append(errs, Invalid(p+".effect", t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	return errs
}

// Divisors Kubernetes accepts (validateContainerResourceDivisor), by
// resource; the detail of its error names them.
var (
	cpuDivisors     = []string{"1m", "1"}
	storageDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

// validateDivisor checks a resourceFieldRef's divisor as Kubernetes does,
// with its words, but by value: Kubernetes compares divisor.String(), which
// prints "1000E" as "1" (apimachinery drops the suffix past E) and so takes
// a divisor of 10^21 for 1.
func validateDivisor(name string, d Quantity, path string) FieldErrors {
	allowed, what := storageDivisors, "memory"
	switch name {
	case "limits.cpu", "requests.cpu":
		allowed, what = cpuDivisors, "cpu"
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		what = "local ephemeral storage"
	}
	for _, a := range allowed {
		if d.Cmp(resource.MustParse(a)) == 0 {
			return nil
		}
	}
	values := strings.Join(allowed, ", ")
	if len(allowed) == 2 {
		values = allowed[0] + " and " + allowed[1]
	}
	return FieldErrors{Invalid(path, name, fmt.Sprintf("only divisor's values %s are supported with the %s resource", values, what))}
}

// ProbeKinds are the probes a container may have, as the
// AnnotationSimulatedProbeFailure fault names them.
var ProbeKinds = []string{"startup", "liveness", "readiness"}

// SimulatedProbeFailures parses AnnotationSimulatedProbeFailure: the set
// of probe kinds that fail on a simulated node. Unknown words are left
// out (validation refuses them on write).
func SimulatedProbeFailures(annotations map[string]string) map[string]bool {
	v, ok := annotations[AnnotationSimulatedProbeFailure]
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); slices.Contains(ProbeKinds, k) {
			out[k] = true
		}
	}
	return out
}

// validateSimulatedProbeFailure checks the fault annotation of a pod (or
// pod template: prefix "spec.template.").
func validateSimulatedProbeFailure(annotations map[string]string, prefix string) FieldErrors {
	v, ok := annotations[AnnotationSimulatedProbeFailure]
	if !ok {
		return nil
	}
	var errs FieldErrors
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); !slices.Contains(ProbeKinds, k) {
			errs = append(errs, NotSupported(prefix+"metadata.annotations["+AnnotationSimulatedProbeFailure+"]", k, ProbeKinds...))
		}
	}
	return errs
}
