package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// FewestPods is the template of a plugin of your own: a score plugin that
// prefers the node running the fewest pods. It is in the registry (one
// line in Registry) but in no profile: enable it in a
// KubeSchedulerConfiguration,
//
//	profiles:
//	- plugins:
//	    score:
//	      enabled:
//	      - name: FewestPods
//	        weight: 3
//
// and test it alone with package plugintest (fewestpods_test.go). A
// plugin is a type with Name and the methods of the extension points it
// fills (framework/framework.go: FilterPlugin, ScorePlugin, ...); Filter
// and Score run on several goroutines at once, so it must not change
// shared state without a lock, and must not block.
type FewestPods struct{}

var _ framework.ScorePlugin = (*FewestPods)(nil)

// FewestPodsName is its name in configurations.
const FewestPodsName = "FewestPods"

// Name implements framework.Plugin.
func (*FewestPods) Name() string { return FewestPodsName }

// Score implements framework.ScorePlugin: the pods already on the node
// (NormalizeScore turns "fewer" into "better").
func (*FewestPods) Score(_ context.Context, _ *framework.CycleState, _ *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	return int64(len(node.Pods)), nil
}

// NormalizeScore implements framework.ScorePlugin: the emptiest node gets
// 100, the fullest 0.
func (*FewestPods) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *api.Pod, scores []framework.NodeScore) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}
