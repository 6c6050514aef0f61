package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	v1 "k8s.io/kube-scheduler/config/v1"
)

// Why skiff refuses fields kube-scheduler has: the scheduler is part of
// skiff's control plane, not a process of its own.
const (
	whyLeaderElection = "skiff's scheduler runs inside the control plane, on the server that leads it (one election for every controller, docs/stores.md); remove leaderElection"
	whyClient         = "skiff's scheduler client speaks JSON with no rate limit; only clientConnection.kubeconfig is read"
	whyProfiling      = "skiff serves no profiling endpoint for its scheduler"
	whyDelayCache     = "skiff's scheduler fills its cache once it runs, on the leading server"
	whyPlacement      = "workload-aware placement plugins (Kubernetes' alpha GenericWorkload) are not in skiff"
)

// unsupported lists the fields of a decoded, not yet defaulted
// configuration that skiff does not implement. Each is refused rather
// than silently ignored.
func unsupported(c *v1.KubeSchedulerConfiguration) field.ErrorList {
	var errs field.ErrorList
	le, lp := c.LeaderElection, field.NewPath("leaderElection")
	if le.LeaderElect != nil && !*le.LeaderElect {
		errs = append(errs, field.Forbidden(lp.Child("leaderElect"), whyLeaderElection))
	}
	for name, set := range map[string]bool{
		"leaseDuration": le.LeaseDuration.Duration != 0, "renewDeadline": le.RenewDeadline.Duration != 0,
		"retryPeriod": le.RetryPeriod.Duration != 0, "resourceLock": le.ResourceLock != "",
		"resourceName": le.ResourceName != "", "resourceNamespace": le.ResourceNamespace != "",
	} {
		if set {
			errs = append(errs, field.Forbidden(lp.Child(name), whyLeaderElection))
		}
	}
	cc, cp := c.ClientConnection, field.NewPath("clientConnection")
	for name, set := range map[string]bool{
		"acceptContentTypes": cc.AcceptContentTypes != "", "contentType": cc.ContentType != "",
		"qps": cc.QPS != 0, "burst": cc.Burst != 0,
	} {
		if set {
			errs = append(errs, field.Forbidden(cp.Child(name), whyClient))
		}
	}
	if c.EnableProfiling != nil {
		errs = append(errs, field.Forbidden(field.NewPath("enableProfiling"), whyProfiling))
	}
	if c.EnableContentionProfiling != nil {
		errs = append(errs, field.Forbidden(field.NewPath("enableContentionProfiling"), whyProfiling))
	}
	if c.DelayCacheUntilActive {
		errs = append(errs, field.Forbidden(field.NewPath("delayCacheUntilActive"), whyDelayCache))
	}
	for i, p := range c.Profiles {
		if p.Plugins == nil {
			continue
		}
		pp := field.NewPath("profiles").Index(i).Child("plugins")
		if len(p.Plugins.PlacementGenerate.Enabled)+len(p.Plugins.PlacementGenerate.Disabled) > 0 {
			errs = append(errs, field.Forbidden(pp.Child("placementGenerate"), whyPlacement))
		}
		if len(p.Plugins.PlacementScore.Enabled)+len(p.Plugins.PlacementScore.Disabled) > 0 {
			errs = append(errs, field.Forbidden(pp.Child("placementScore"), whyPlacement))
		}
	}
	slices.SortFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// removedPlugins were Kubernetes' and are refused by its validation in
// v1 ("was invalid in version").
var removedPlugins = []string{"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"}

// validate checks a defaulted configuration with Kubernetes' rules
// (ValidateKubeSchedulerConfiguration) and words, every problem at once.
func validate(c *v1.KubeSchedulerConfiguration) field.ErrorList {
	var errs field.ErrorList
	if *c.Parallelism <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("parallelism"), *c.Parallelism, "should be an integer value greater than zero"))
	}
	pp := field.NewPath("profiles")
	seen := map[string]bool{}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		path := pp.Index(i)
		errs = append(errs, validateProfile(path, p)...)
		if seen[*p.SchedulerName] {
			errs = append(errs, field.Duplicate(path.Child("schedulerName"), *p.SchedulerName))
		}
		seen[*p.SchedulerName] = true
	}
	errs = append(errs, validateCommonQueueSort(pp, c.Profiles)...)
	errs = append(errs, validatePercentage(field.NewPath("percentageOfNodesToScore"), c.PercentageOfNodesToScore)...)
	if *c.PodInitialBackoffSeconds <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("podInitialBackoffSeconds"), *c.PodInitialBackoffSeconds, "must be greater than 0"))
	}
	if *c.PodMaxBackoffSeconds < *c.PodInitialBackoffSeconds {
		errs = append(errs, field.Invalid(field.NewPath("podMaxBackoffSeconds"), *c.PodMaxBackoffSeconds, "must be greater than or equal to PodInitialBackoffSeconds"))
	}
	errs = append(errs, validateExtenders(field.NewPath("extenders"), c.Extenders)...)
	return errs
}

func validatePercentage(p *field.Path, v *int32) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(p, *v, "not in valid range [0-100]")}
	}
	return nil
}

func validateProfile(path *field.Path, p *v1.KubeSchedulerProfile) field.ErrorList {
	var errs field.ErrorList
	if *p.SchedulerName == "" {
		errs = append(errs, field.Required(path.Child("schedulerName"), ""))
	}
	errs = append(errs, validatePercentage(path.Child("percentageOfNodesToScore"), p.PercentageOfNodesToScore)...)
	for _, ep := range pluginSets(p.Plugins) {
		for i, pl := range ep.set.Enabled {
			if slices.Contains(removedPlugins, pl.Name) {
				errs = append(errs, field.Invalid(path.Child("plugins", ep.Name, "enabled").Index(i), pl.Name,
					fmt.Sprintf("was invalid in version %q (KubeSchedulerConfiguration is version %q)", APIVersion, APIVersion)))
			}
		}
	}
	seen := map[string]bool{}
	for i, pc := range p.PluginConfig {
		cp := path.Child("pluginConfig").Index(i)
		if seen[pc.Name] {
			errs = append(errs, field.Duplicate(cp, pc.Name))
		}
		seen[pc.Name] = true
		if slices.Contains(removedPlugins, pc.Name) {
			errs = append(errs, field.Invalid(cp, pc.Name, fmt.Sprintf("was invalid in version %q (KubeSchedulerConfiguration is version %q)", APIVersion, APIVersion)))
			continue
		}
		k, ok := argKinds[pc.Name]
		if !ok {
			continue // an out-of-tree plugin's: its factory decides
		}
		args := pc.Args.Object
		if args == nil || reflect.TypeOf(args) != reflect.TypeOf(k.new()) {
			errs = append(errs, field.Invalid(cp.Child("args"), argsKind(args), "has to match plugin args"))
			continue
		}
		errs = append(errs, k.validate(cp.Child("args"), args)...)
	}
	return errs
}

func argsKind(o runtime.Object) string {
	if o == nil {
		return "<none>"
	}
	return o.GetObjectKind().GroupVersionKind().Kind
}

func validateCommonQueueSort(path *field.Path, profiles []v1.KubeSchedulerProfile) field.ErrorList {
	var errs field.ErrorList
	if len(profiles) == 0 {
		return field.ErrorList{field.Required(path, "")}
	}
	canon := profiles[0].Plugins.QueueSort
	if n := len(canon.Enabled); n > 1 {
		errs = append(errs, field.Invalid(path.Index(0).Child("plugins", "queueSort", "Enabled"), n, "only one queue sort plugin can be enabled"))
	}
	for i := 1; i < len(profiles); i++ {
		if !reflect.DeepEqual(canon, profiles[i].Plugins.QueueSort) {
			errs = append(errs, field.Invalid(path.Index(i).Child("plugins", "queueSort"), profiles[i].Plugins.QueueSort, "must be the same for all profiles"))
		}
	}
	return errs
}

func validateExtenders(path *field.Path, extenders []v1.Extender) field.ErrorList {
	var errs field.ErrorList
	binders := 0
	managed := map[string]bool{}
	for i, e := range extenders {
		ep := path.Index(i)
		if e.PrioritizeVerb != "" && e.Weight <= 0 {
			errs = append(errs, field.Invalid(ep.Child("weight"), e.Weight, "must have a positive weight applied to it"))
		}
		if e.BindVerb != "" {
			binders++
		}
		for j, r := range e.ManagedResources {
			np := ep.Child("managedResources").Index(j).Child("name")
			msgs := validation.IsQualifiedName(r.Name)
			for _, m := range msgs {
				errs = append(errs, field.Invalid(np, r.Name, m))
			}
			if len(msgs) == 0 && !isExtendedResourceName(r.Name) {
				errs = append(errs, field.Invalid(np, r.Name, "is an invalid extended resource name"))
			}
			if managed[r.Name] {
				errs = append(errs, field.Invalid(np, r.Name, "duplicate extender managed resource name"))
			}
			managed[r.Name] = true
		}
	}
	if binders > 1 {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("found %d extenders implementing bind", binders), "only one extender can implement bind"))
	}
	return errs
}

// isExtendedResourceName is Kubernetes' v1helper.IsExtendedResourceName:
// a domain-prefixed name outside kubernetes.io, not requests.*.
func isExtendedResourceName(name string) bool {
	if isNativeResource(name) || strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

func isNativeResource(name string) bool {
	dom, _, ok := strings.Cut(name, "/")
	return !ok || dom == "kubernetes.io" || strings.HasSuffix(dom, ".kubernetes.io")
}
