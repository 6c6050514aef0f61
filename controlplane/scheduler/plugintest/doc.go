// Package plugintest runs one scheduler plugin on a table of nodes and
// pods, with no scheduler, no API and no goroutines: the test harness for
// a plugin of your own (docs/labs.md, "Write a scheduler plugin").
//
// Give it the plugin, the nodes, the pods already on them (spec.nodeName
// set) and the pod to place. It does what one scheduling cycle does to
// that plugin alone: PreFilter, Filter on every node, then PreScore,
// Score and NormalizeScore on the nodes that passed, and reports each
// node's verdict and scores:
//
//	res, err := plugintest.Run(ctx, &plugins.FewestPods{}, plugintest.Case{
//		Nodes: []*api.Node{plugintest.Node("a", plugintest.GPUs(8)), plugintest.Node("b", plugintest.GPUs(8))},
//		Pods:  []*api.Pod{plugintest.Pod("old", plugintest.OnNode("a"))},
//		Pod:   plugintest.Pod("new", plugintest.GPULimit(1)),
//	})
//	// res.Best() == "b"
//
// The nodes and pods are built from the framework's own types
// (framework.NodeInfo, framework.CycleState), as the scheduler builds them,
// so what passes here passes in skiff.
package plugintest
