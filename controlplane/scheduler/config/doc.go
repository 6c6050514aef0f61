// Package config reads the scheduler's configuration: Kubernetes'
// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), the file
// `kube-scheduler --config` takes and `skiff up --scheduler-config` takes
// too, so the Kubernetes docs' examples and a tutorial's file work here
// unchanged.
//
// A configuration is a list of profiles. Each profile has a
// schedulerName (a pod picks one with spec.schedulerName; a pod naming no
// profile is left alone, Pending, as Kubernetes leaves it), the plugins
// that run at each extension point and their arguments:
//
//	apiVersion: kubescheduler.config.k8s.io/v1
//	kind: KubeSchedulerConfiguration
//	profiles:
//	- schedulerName: default-scheduler
//	  plugins:
//	    score:
//	      disabled: [{name: NodeResourcesBalancedAllocation}]
//	  pluginConfig:
//	  - name: NodeResourcesFit
//	    args:
//	      scoringStrategy:
//	        type: MostAllocated
//	        resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]
//
// # Reading a file, as kube-scheduler does
//
//  1. Decode strictly (k8s.io/kube-scheduler's types through apimachinery's
//     strict serializer): an unknown or duplicate field is an error naming
//     its path (`unknown field "profiles[0].plugins.score.enabled[0].wieght"`),
//     and so is one in a plugin's args.
//  2. Refuse what skiff does not do (leader election settings, a client
//     rate limit, ...): an error naming the field, never a setting
//     silently ignored.
//  3. Default as Kubernetes: one profile "default-scheduler" when none is
//     given; each profile's plugins merged into the default plugins
//     (DefaultPlugins: enabled lists replace or append, disabled removes,
//     '*' removes all of an extension point); every enabled plugin with
//     arguments gets its defaulted args (NodeResourcesFit: LeastAllocated
//     over cpu and memory).
//  4. Validate with Kubernetes' rules and words, every problem at once
//     (`profiles[1].schedulerName: Required value`).
//
// Whether each named plugin exists is decided when the scheduler builds
// its profiles (the registry is the scheduler's), again with Kubernetes'
// words: `ScorePlugin "MyPlugin" does not exist`.
//
// # Invariants
//
//   - Parse either returns a Config whose every field is set and valid, or
//     an error; it never returns a half-read configuration.
//   - All profiles share one queueSort plugin (the scheduler has one queue).
//   - A Config is not changed after Parse returns it; Watch hands each new
//     valid one to its callback whole.
package config
