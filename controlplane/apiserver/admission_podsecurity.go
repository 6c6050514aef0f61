package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psadmission "k8s.io/pod-security-admission/admission/api"
	psvalidation "k8s.io/pod-security-admission/admission/api/validation"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
	"skiff.dev/skiff/internal/recent"
)

// Pod Security admission, as Kubernetes' PodSecurity admission plugin
// (k8s.io/pod-security-admission, enabled in every cluster since 1.25):
//
//   - A namespace's labels choose its policy, one level per mode:
//     pod-security.kubernetes.io/enforce, .../warn and .../audit, each
//     privileged, baseline or restricted, with .../enforce-version (and
//     warn-version, audit-version) "latest" or "v1.N". A label that is not
//     set takes Config.PodSecurity.Defaults.
//   - enforce: a pod that violates the level is refused, 403 Forbidden,
//     `pods "NAME" is forbidden: violates PodSecurity "baseline:latest":
//     host namespaces (hostNetwork=true), hostPath volumes (volume "root")`.
//   - warn: the request succeeds with a Warning header (warning.go),
//     `would violate PodSecurity "restricted:latest": ...`, that the CLI
//     prints as kubectl does ("Warning: ...").
//   - audit: the request succeeds and the server logs the violation
//     (kube-apiserver writes it to its audit log as the annotation
//     pod-security.kubernetes.io/audit-violations; skiff has no audit log).
//   - Deployments, ReplicaSets, DaemonSets and CronJobs get warn and audit about
//     their pod template, never enforce: the pods they make are refused
//     when their controller creates them (its FailedCreate event says why).
//   - Exempt namespaces (Config.PodSecurity.Exemptions.Namespaces) are
//     never checked.
//   - A namespace's labels are validated when they are set (422 Invalid
//     naming the label), and making enforce stricter warns about the pods
//     already there that violate it (the first 3000, for at most 1 s).
//   - A pod update is checked only when it changes an image (the only pod
//     spec field an update may change); status, binding and the other
//     subresources are not checked.
//
// The checks and their messages are Kubernetes' own (the policy package
// evaluates a corev1.PodSpec; patch.ToKubernetes converts skiff's types).
// The steps above follow that module's admission/admission.go line for
// line; that package itself is not imported because it brings client-go's
// typed clientset (about 17 MB of binary) for a namespace getter and a pod
// lister that skiff reads from its store.
//
// Pods carry Kubernetes' securityContext (api/security.go), so every
// check applies as on a real cluster: baseline refuses privileged
// containers (`privileged (container "c" must not set
// securityContext.privileged=true)`), added capabilities beyond the
// baseline set, host namespaces, hostPath volumes, host ports, unsafe
// sysctls and seccomp Unconfined; restricted also requires runAsNonRoot,
// seccompProfile RuntimeDefault or Localhost, allowPrivilegeEscalation
// false and capabilities drop ALL. (SELinux and AppArmor options are
// refused when skiff decodes a pod, so their checks always pass.)
var podSecurityKinds = []*api.Kind{namespaceKind, podKind, deploymentKind, replicaSetKind, daemonSetKind, cronJobKind}

// PodSecurityConfig is the configuration of kube-apiserver's PodSecurity
// admission plugin (AdmissionConfiguration, kind PodSecurityConfiguration),
// Kubernetes' own type:
//
//   - Defaults: the level (privileged, baseline, restricted) and version
//     ("latest" or "v1.N") of each mode for a namespace without labels.
//   - Exemptions.Namespaces: namespaces that are never checked.
//   - Exemptions.Usernames and RuntimeClasses: not supported by skiff (one
//     token, no users; no runtime classes), refused by Validate.
type PodSecurityConfig = psadmission.PodSecurityConfiguration

// DefaultPodSecurity is skiff's default: every namespace at baseline for
// enforce, warn and audit, kube-system exempt.
//
// Baseline refuses what would hand a student the node (a privileged
// container, a hostPath volume of "/", the node's network, its ports) and
// accepts every lab of the course; restricted also asks each pod to run
// as non-root without capabilities (see above). A teacher
// lifts it per namespace with the label
// pod-security.kubernetes.io/enforce=privileged (warn and audit stay at
// the default until labelled too), or for the whole cluster with
// `skiff up --pod-security-default=privileged`. kube-system is exempt as in
// Kubernetes' own example configuration: system pods are the teacher's.
// (Kubernetes' built-in default is privileged everywhere; clusters for
// students are where baseline is recommended.)
func DefaultPodSecurity() PodSecurityConfig {
	return PodSecurityConfig{
		Defaults: psadmission.PodSecurityDefaults{
			Enforce: string(psapi.LevelBaseline), EnforceVersion: psapi.VersionLatest,
			Warn: string(psapi.LevelBaseline), WarnVersion: psapi.VersionLatest,
			Audit: string(psapi.LevelBaseline), AuditVersion: psapi.VersionLatest,
		},
		Exemptions: psadmission.PodSecurityExemptions{Namespaces: []string{"kube-system"}},
	}
}

// PodSecurityAt is the configuration with every default mode at level
// (privileged, baseline or restricted), version latest, kube-system
// exempt: what `--pod-security-default=LEVEL` means.
func PodSecurityAt(level string) PodSecurityConfig {
	c := DefaultPodSecurity()
	c.Defaults.Enforce, c.Defaults.Warn, c.Defaults.Audit = level, level, level
	return c
}

// validatePodSecurity reports every problem of c at once, in Kubernetes'
// words (defaults.enforce: Invalid value: "strict": must be one of
// privileged, baseline, restricted).
func validatePodSecurity(c PodSecurityConfig) error {
	errs := psvalidation.ValidatePodSecurityConfiguration(&c)
	if len(c.Exemptions.Usernames) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("exemptions", "usernames"), "not supported by skiff: one token, no user names"))
	}
	if len(c.Exemptions.RuntimeClasses) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("exemptions", "runtimeClasses"), "not supported by skiff: no runtime classes"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("pod security: %w", errs.ToAggregate())
}

// podSecurity is a validated configuration, ready to evaluate.
type podSecurity struct {
	defaults  psapi.Policy
	exempt    []string // namespaces
	evaluator policy.Evaluator
	// verdicts are the checks' results on recent pods, by the shape of
	// what the checks read (podSecurityKey) and the level and version: the
	// pods of one template are converted and checked once.
	verdicts *recent.Cache[verdictKey, policy.AggregateCheckResult]
}

// podSecurityVerdicts bounds podSecurity.verdicts (recent.Cache): each
// entry is a digest and a result of a few strings.
const podSecurityVerdicts = 512

// Bounds of the check of existing pods when a namespace's enforce level
// gets stricter, as Kubernetes (defaultNamespaceMaxPodsToCheck,
// defaultNamespacePodCheckTimeout).
const (
	podSecurityMaxPodsToCheck  = 3000
	podSecurityPodCheckTimeout = time.Second
)

func newPodSecurity(c PodSecurityConfig) (*podSecurity, error) {
	if err := validatePodSecurity(c); err != nil {
		return nil, err
	}
	defaults, err := psadmission.ToPolicy(c.Defaults)
	if err != nil {
		return nil, fmt.Errorf("pod security: %w", err)
	}
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("pod security checks: %w", err)
	}
	return &podSecurity{defaults: defaults, exempt: slices.Clone(c.Exemptions.Namespaces), evaluator: ev,
		verdicts: recent.New[verdictKey, policy.AggregateCheckResult](podSecurityVerdicts)}, nil
}

// SetPodSecurity makes the registry enforce c from now on (Server's New
// applies Config.PodSecurity). A registry that was never given one admits
// every pod, as a Kubernetes API server without the plugin.
func (r *Registry) SetPodSecurity(c PodSecurityConfig) error {
	ps, err := newPodSecurity(c)
	if err != nil {
		return err
	}
	r.podSecurity.Store(ps)
	return nil
}

// admitPodSecurity runs the admission above on a create (old nil) or an
// update of obj, which is not changed. Other kinds pass. ns is obj's
// namespace when the request has read it already (Create's lifecycle
// check), else nil: it is read here.
func (r *Registry) admitPodSecurity(ctx context.Context, k *api.Kind, obj, old api.Object, ns *api.Namespace) error {
	ps := r.podSecurity.Load()
	if ps == nil || !slices.Contains(podSecurityKinds, k) {
		return nil
	}
	if k == namespaceKind {
		return r.admitNamespaceSecurity(ctx, ps, obj.(*api.Namespace), old)
	}
	m := obj.GetObjectMeta()
	if slices.Contains(ps.exempt, m.Namespace) {
		return nil
	}
	if pod, ok := obj.(*api.Pod); ok && old != nil && !podImagesChanged(pod, old.(*api.Pod)) {
		return nil
	}
	if ns == nil || ns.Name != m.Namespace {
		nsObj, err := r.getShared(ctx, namespaceKind, "", m.Namespace)
		if err != nil {
			if k == podKind {
				return api.NewInternal(fmt.Errorf("failed to lookup namespace %q: %w", m.Namespace, err))
			}
			r.log.Warn("pod security: read namespace", "namespace", m.Namespace, "err", err)
			return nil // workloads are never refused (kube: an audit annotation)
		}
		ns = nsObj.(*api.Namespace)
	}
	nsPolicy, nsErrs := psapi.PolicyToEvaluate(ns.Labels, ps.defaults)
	enforce := k == podKind
	if len(nsErrs) == 0 && nsPolicy.Warn.Level == psapi.LevelPrivileged && nsPolicy.Audit.Level == psapi.LevelPrivileged &&
		(!enforce || nsPolicy.Enforce.Level == psapi.LevelPrivileged) {
		return nil // nothing to check
	}
	if len(nsErrs) > 0 {
		// Invalid labels (set before this server checked them): the
		// library fell back to restricted for them, as Kubernetes.
		r.log.Info("pod security: failed to parse namespace labels", "namespace", m.Namespace, "err", nsErrs.ToAggregate())
	}
	levels := []psapi.LevelVersion{nsPolicy.Audit, nsPolicy.Warn}
	if enforce {
		levels = append(levels, nsPolicy.Enforce)
	}
	// A pod whose shape was checked at these levels lately is not
	// converted again: the verdicts are remembered.
	results := map[psapi.LevelVersion]policy.AggregateCheckResult{}
	remembered := map[psapi.LevelVersion]bool{}
	pod, _ := obj.(*api.Pod)
	var podKey shapeKey
	keyed := false
	if pod != nil {
		podKey, keyed = podSecurityKey(pod)
	}
	if keyed {
		for _, lv := range levels {
			if res, ok := ps.verdicts.Get(verdictKey{podKey, lv}); ok {
				results[lv], remembered[lv] = res, true
			}
		}
	}
	var meta *metav1.ObjectMeta
	var spec *corev1.PodSpec
	if !all(levels, remembered) {
		var err error
		if meta, spec, err = kubePodSpec(k, obj); err != nil {
			if enforce {
				return api.NewInternal(fmt.Errorf("pod security: %w", err))
			}
			r.log.Warn("pod security: read pod template", "kind", k.Kind, "key", api.KeyOf(obj), "err", err)
			return nil
		}
	}
	err := r.evaluatePodSecurity(ctx, ps, nsPolicy, k, obj, meta, spec, enforce, results)
	if keyed {
		for lv, res := range results {
			if !remembered[lv] {
				ps.verdicts.Put(verdictKey{podKey, lv}, res)
			}
		}
	}
	return err
}

// all reports whether set holds every level.
func all(levels []psapi.LevelVersion, set map[psapi.LevelVersion]bool) bool {
	for _, lv := range levels {
		if !set[lv] {
			return false
		}
	}
	return true
}

// podSecurityKey is the shape key (shapekey.go) of podSecurityShape's
// parts: pods that share it get the same verdict at every level. It
// encodes the parts, not the pod they make: a few fields per container
// instead of every field of a PodSpec and its Containers.
func podSecurityKey(pod *api.Pod) (shapeKey, bool) {
	parts := podSecurityShapeParts(pod)
	kb := newKeyBuilder()
	kb.value(&parts)
	return kb.sum()
}

// podSecurityShape is what Pod Security's checks read of a pod: its
// annotations (AppArmor's and seccomp's, as older pods set them) and
// podSecuritySpec, but for the name of each volume that is projected and
// nothing else, left out: every level admits such a volume, so no check
// names it, and the service account's (kube-api-access-XXXXX) has a name
// of its own in every pod. TestPodSecuritySpecGivesTheFullSpecsResults
// checks the verdict on the shape against the whole pod's.
func podSecurityShape(pod *api.Pod) *api.Pod {
	parts := podSecurityShapeParts(pod)
	return &api.Pod{ObjectMeta: api.ObjectMeta{Annotations: parts.Annotations}, Spec: parts.spec()}
}

// podSecurityShapeParts are the parts of podSecurityShape.
func podSecurityShapeParts(pod *api.Pod) podSecurityParts {
	parts := podSecurityPartsOf(&pod.Spec)
	parts.Annotations = pod.Annotations
	copied := false
	for i, v := range parts.Volumes {
		if v.Name == "" || !projectedOnly(v) {
			continue
		}
		if !copied {
			parts.Volumes, copied = slices.Clone(parts.Volumes), true
		}
		parts.Volumes[i].Name = ""
	}
	return parts
}

// projectedOnly reports whether v's one source is a projected volume.
func projectedOnly(v api.Volume) bool {
	if v.Projected == nil {
		return false
	}
	v.Name, v.Projected = "", nil
	return reflect.ValueOf(v).IsZero()
}

// verdictKey is the key of a pod's verdict at a level and version: the
// shape key of the pod's podSecurityShape and the LevelVersion.
type verdictKey struct {
	pod shapeKey
	lv  psapi.LevelVersion
}

// evaluatePodSecurity is Kubernetes' EvaluatePod: enforce (pods only),
// then audit, then warn unless the request is refused. results holds the
// verdicts known already (meta and spec may be nil when it holds every one
// needed) and gets those evaluated here.
func (r *Registry) evaluatePodSecurity(ctx context.Context, ps *podSecurity, nsPolicy psapi.Policy, k *api.Kind, obj api.Object,
	meta *metav1.ObjectMeta, spec *corev1.PodSpec, enforce bool, results map[psapi.LevelVersion]policy.AggregateCheckResult) error {
	m := obj.GetObjectMeta()
	eval := func(lv psapi.LevelVersion) policy.AggregateCheckResult {
		res, ok := results[lv]
		if !ok {
			res = policy.AggregateCheckResults(ps.evaluator.EvaluatePod(lv, meta, spec))
			results[lv] = res
		}
		return res
	}
	var refused error
	if enforce {
		if res := eval(nsPolicy.Enforce); !res.Allowed {
			refused = forbidden(k, m.Name, fmt.Sprintf("violates PodSecurity %q: %s", nsPolicy.Enforce.String(), res.ForbiddenDetail()))
		}
	}
	if res := eval(nsPolicy.Audit); !res.Allowed {
		r.log.Info("pod security audit", "kind", k.Kind, "namespace", m.Namespace, "name", m.Name,
			psapi.AuditAnnotationPrefix+psapi.AuditViolationsAnnotationKey,
			fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Audit.String(), res.ForbiddenDetail()))
	}
	if refused != nil {
		return refused // no warnings on a refused request
	}
	if res := eval(nsPolicy.Warn); !res.Allowed {
		addWarning(ctx, fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Warn.String(), res.ForbiddenDetail()))
	}
	return nil
}

// admitNamespaceSecurity is Kubernetes' ValidateNamespace: labels must be
// valid when set or changed; an exempt namespace that sets a policy gets a
// warning that it is ignored; a stricter enforce level warns about the
// existing pods that violate it.
func (r *Registry) admitNamespaceSecurity(ctx context.Context, ps *podSecurity, ns *api.Namespace, old api.Object) error {
	newPolicy, newErrs := psapi.PolicyToEvaluate(ns.Labels, ps.defaults)
	exempt := slices.Contains(ps.exempt, ns.Name)
	if old == nil {
		if len(newErrs) > 0 {
			return api.NewInvalid(namespaceKind, ns.Name, fieldErrors(newErrs))
		}
		if exempt {
			addWarning(ctx, exemptNamespaceWarning(ps, ns.Name, newPolicy, ns.Labels))
		}
		return nil
	}
	oldPolicy, oldErrs := psapi.PolicyToEvaluate(old.(*api.Namespace).Labels, ps.defaults)
	if len(newErrs) > 0 && (len(oldErrs) == 0 || !reflect.DeepEqual(newErrs, oldErrs)) {
		return api.NewInvalid(namespaceKind, ns.Name, fieldErrors(newErrs))
	}
	switch {
	case newPolicy.Enforce == oldPolicy.Enforce,
		newPolicy.Enforce.Level == psapi.LevelPrivileged,
		newPolicy.Enforce.Version == oldPolicy.Enforce.Version && psapi.CompareLevels(newPolicy.Enforce.Level, oldPolicy.Enforce.Level) < 1:
		return nil
	case exempt:
		addWarning(ctx, exemptNamespaceWarning(ps, ns.Name, newPolicy, ns.Labels))
		return nil
	}
	for _, w := range r.podsViolating(ctx, ps, ns.Name, newPolicy.Enforce) {
		addWarning(ctx, w)
	}
	return nil
}

// podsViolating is Kubernetes' EvaluatePodsInNamespace: the warnings about
// the pods of namespace that violate enforce, one per distinct reason,
// naming the first pod (and how many others); one pod per controller is
// checked first.
func (r *Registry) podsViolating(ctx context.Context, ps *podSecurity, namespace string, enforce psapi.LevelVersion) []string {
	timeout := podSecurityPodCheckTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)/2 < timeout {
		timeout = time.Until(dl) / 2 // never more than half the time left
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	items, _, err := r.store.List(ctx, podKind, namespace)
	if err != nil {
		r.log.Warn("pod security: list pods", "namespace", namespace, "err", err)
		return []string{"failed to list pods while checking new PodSecurity enforce level"}
	}
	pods := make([]*corev1.Pod, 0, len(items))
	for _, o := range items {
		kp, err := patch.ToKubernetes("v1", "Pod", o)
		if err != nil {
			r.log.Warn("pod security: convert pod", "pod", api.KeyOf(o), "err", err)
			continue
		}
		pods = append(pods, kp.(*corev1.Pod))
	}
	pods = prioritizePods(pods)
	total, checked := len(pods), len(pods)
	if checked > podSecurityMaxPodsToCheck {
		checked = podSecurityMaxPodsToCheck
	}
	type podCount struct {
		name  string // the lexically first pod with the warning
		count int
	}
	var order []string
	counts := map[string]podCount{}
	for i, pod := range pods[:checked] {
		res := policy.AggregateCheckResults(ps.evaluator.EvaluatePod(enforce, &pod.ObjectMeta, &pod.Spec))
		if !res.Allowed {
			w := res.ForbiddenReason()
			c, seen := counts[w]
			if !seen {
				c.name = pod.Name
				order = append(order, w)
			} else if pod.Name < c.name {
				c.name = pod.Name
			}
			c.count++
			counts[w] = c
		}
		if ctx.Err() != nil {
			checked = i + 1
			break
		}
	}
	var out []string
	if checked < total {
		out = append(out, fmt.Sprintf("new PodSecurity enforce level only checked against the first %d of %d existing pods", checked, total))
	}
	if len(order) > 0 {
		out = append(out, fmt.Sprintf("existing pods in namespace %q violate the new PodSecurity enforce level %q", namespace, enforce.String()))
	}
	for i, w := range order {
		switch c := counts[w]; c.count {
		case 1:
			order[i] = fmt.Sprintf("%s: %s", c.name, w)
		case 2:
			order[i] = fmt.Sprintf("%s (and 1 other pod): %s", c.name, w)
		default:
			order[i] = fmt.Sprintf("%s (and %d other pods): %s", c.name, c.count-1, w)
		}
	}
	sort.Strings(order)
	return append(out, order...)
}

// prioritizePods puts one pod per controller first, then the pods of
// controllers already represented (Kubernetes' prioritizePods).
func prioritizePods(pods []*corev1.Pod) []*corev1.Pod {
	var first, rest []*corev1.Pod
	seen := map[types.UID]bool{}
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		switch {
		case ref == nil:
			first = append(first, p)
		case seen[ref.UID]:
			rest = append(rest, p)
		default:
			seen[ref.UID] = true
			first = append(first, p)
		}
	}
	return append(first, rest...)
}

// exemptNamespaceWarning says that an exempt namespace's explicit
// non-privileged policy is ignored; "" when there is nothing to say.
func exemptNamespaceWarning(ps *podSecurity, namespace string, p psapi.Policy, labels map[string]string) string {
	if p.FullyPrivileged() || p.Equivalent(&ps.defaults) {
		return ""
	}
	var parts []string
	for _, mode := range []struct {
		name, level, version string
		lv                   psapi.LevelVersion
	}{
		{"enforce", psapi.EnforceLevelLabel, psapi.EnforceVersionLabel, p.Enforce},
		{"audit", psapi.AuditLevelLabel, psapi.AuditVersionLabel, p.Audit},
		{"warn", psapi.WarnLevelLabel, psapi.WarnVersionLabel, p.Warn},
	} {
		_, hasLevel := labels[mode.level]
		_, hasVersion := labels[mode.version]
		if mode.lv.Level != psapi.LevelPrivileged && (hasLevel || hasVersion) {
			parts = append(parts, mode.name+"="+mode.lv.String())
		}
	}
	return fmt.Sprintf("namespace %q is exempt from Pod Security, and the policy (%s) will be ignored", namespace, strings.Join(parts, ", "))
}

// kubePodSpec converts a pod, or the pod template of a Deployment or
// ReplicaSet, to Kubernetes' types for the checks. What the checks never
// read is left out of the conversion (a JSON round trip): the object's
// managedFields (often the larger part of a new object's JSON, written
// just before by trackFields), a pod's status and, for a pod, the parts
// of its spec podSecuritySpec leaves out.
func kubePodSpec(k *api.Kind, obj api.Object) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	obj = forPodSecurity(obj)
	ko, err := patch.ToKubernetes(k.APIVersion(), k.Kind, obj)
	if err != nil {
		return nil, nil, err
	}
	switch o := ko.(type) {
	case *corev1.Pod:
		return &o.ObjectMeta, &o.Spec, nil
	case *appsv1.Deployment:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, nil
	case *appsv1.ReplicaSet:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, nil
	case *appsv1.DaemonSet:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec, nil
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec, nil
	}
	return nil, nil, fmt.Errorf("%s has no pod spec", k.Kind)
}

// forPodSecurity is a shallow copy of obj without managedFields (and, for
// a pod, without status, its spec as podSecuritySpec gives it); obj is
// not changed, and the copy shares the rest (read only).
func forPodSecurity(obj api.Object) api.Object {
	if pod, ok := obj.(*api.Pod); ok {
		c := api.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: podSecuritySpec(&pod.Spec)}
		c.ManagedFields = nil
		return &c
	}
	v := reflect.New(reflect.TypeOf(obj).Elem())
	v.Elem().Set(reflect.ValueOf(obj).Elem())
	c := v.Interface().(api.Object)
	c.GetObjectMeta().ManagedFields = nil
	return c
}

// podSecuritySpec is the part of s that Pod Security's checks read
// (podSecurityParts). Converting only these, a pod's conversion costs
// about half (docs/performance.md, tenth sitting).
// TestPodSecuritySpecGivesTheFullSpecsResults checks every level's result
// on random pods against the whole spec's.
func podSecuritySpec(s *api.PodSpec) api.PodSpec {
	parts := podSecurityPartsOf(s)
	return parts.spec()
}

// podSecurityParts are what Pod Security's checks read of a pod
// (k8s.io/pod-security-admission/policy, check_*.go): its annotations
// (where set), hostNetwork, the pod's securityContext, its volumes, and
// each container's name, ports, probes and securityContext. They are the
// one list of what the checks read: podSecuritySpec makes a spec of them,
// podSecurityKey keys verdicts by them.
type podSecurityParts struct {
	Annotations                                     map[string]string
	HostNetwork                                     bool
	SecurityContext                                 *api.PodSecurityContext
	Volumes                                         []api.Volume
	Containers, InitContainers, EphemeralContainers []containerSecurityParts
}

// containerSecurityParts are what the checks read of a container.
type containerSecurityParts struct {
	Name                                        string
	Ports                                       []api.ContainerPort
	SecurityContext                             *api.SecurityContext
	LivenessProbe, ReadinessProbe, StartupProbe *api.Probe
}

// podSecurityPartsOf takes the parts of s (no annotations); they share
// s's lists and pointers.
func podSecurityPartsOf(s *api.PodSpec) podSecurityParts {
	part := func(c *api.Container) containerSecurityParts {
		return containerSecurityParts{Name: c.Name, Ports: c.Ports, SecurityContext: c.SecurityContext,
			LivenessProbe: c.LivenessProbe, ReadinessProbe: c.ReadinessProbe, StartupProbe: c.StartupProbe}
	}
	return podSecurityParts{HostNetwork: s.HostNetwork, SecurityContext: s.SecurityContext, Volumes: s.Volumes,
		Containers: eachOf(s.Containers, part), InitContainers: eachOf(s.InitContainers, part),
		EphemeralContainers: eachOf(s.EphemeralContainers, func(c *api.EphemeralContainer) containerSecurityParts { return part(&c.Container) })}
}

// spec is the PodSpec of p's parts (the annotations are not a spec's).
func (p *podSecurityParts) spec() api.PodSpec {
	container := func(c *containerSecurityParts) api.Container {
		return api.Container{Name: c.Name, Ports: c.Ports, SecurityContext: c.SecurityContext,
			LivenessProbe: c.LivenessProbe, ReadinessProbe: c.ReadinessProbe, StartupProbe: c.StartupProbe}
	}
	return api.PodSpec{HostNetwork: p.HostNetwork, SecurityContext: p.SecurityContext, Volumes: p.Volumes,
		Containers: eachOf(p.Containers, container), InitContainers: eachOf(p.InitContainers, container),
		EphemeralContainers: eachOf(p.EphemeralContainers, func(c *containerSecurityParts) api.EphemeralContainer {
			return api.EphemeralContainer{Container: container(c)}
		})}
}

// eachOf is f of each element of in; nil for nil.
func eachOf[A, B any](in []A, f func(*A) B) []B {
	if in == nil {
		return nil
	}
	out := make([]B, len(in))
	for i := range in {
		out[i] = f(&in[i])
	}
	return out
}

// podImagesChanged is Kubernetes' isSignificantPodUpdate for what a skiff
// pod has: the number of containers (ephemeral ones included) or one of
// their images.
func podImagesChanged(pod, old *api.Pod) bool {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) ||
		len(pod.Spec.EphemeralContainers) != len(old.Spec.EphemeralContainers) {
		return true
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image != old.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Image != old.Spec.InitContainers[i].Image {
			return true
		}
	}
	return false
}

// fieldErrors converts the library's label errors to skiff's.
func fieldErrors(errs field.ErrorList) api.FieldErrors {
	out := make(api.FieldErrors, 0, len(errs))
	for _, e := range errs {
		out = append(out, api.Invalid(e.Field, e.BadValue, e.Detail))
	}
	return out
}

// podSecurity is the configuration New applies: Config.PodSecurity, or
// the default.
func (c Config) podSecurity() PodSecurityConfig {
	if c.PodSecurity != nil {
		return *c.PodSecurity
	}
	return DefaultPodSecurity()
}
