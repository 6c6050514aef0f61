// Package cluster assembles skiff's processes, as kind's pkg/cluster and
// k3s's pkg/server and pkg/agent do: what `skiff up`, `skiff server`,
// `skiff agent` and `skiff device-plugin` start, from one documented
// Config each. The CLI parses flags into a Config, calls Up, Server, Agent
// or DevicePlugin and prints what they return; hack/bench-scheduler and
// the integration tests start the same pieces through StartControlPlane,
// StartNode and StartSimNodes.
//
// # What runs
//
//   - Up: a control plane (controlplane.Start, with the web dashboard
//     attached: dashboard.Attach), its gossip member, the simulated nodes
//     of --sim-nodes and one or more local nodes (node.Start, --nodes N:
//     nodes.go), the kubeconfigs written where skiff and kubectl look
//     (kubeconfig.go). It blocks until its context ends or a node fails.
//   - Server: the same, with the store chosen by Config.Etcd (bbolt,
//     embedded or external etcd) and, with Config.NoAgent, no local node;
//     it prints the command that joins other machines (gossip.go).
//   - Agent: the join and TLS bootstrap (node.Join, node.Credentials),
//     then a node against the API server gossip named (agent.go).
//   - DevicePlugin: the GPU device plugin alone, as NVIDIA's runs beside
//     a kubelet (deviceplugin.go).
//
// A node on real containerd records its containerd in
// ~/.skiff/containerd.json, where `skiff image` finds it (images.go).
// `skiff image self` makes an image of the skiff binary (with the shared
// libraries ldd lists) for skiff's device plugin DaemonSet (selfimage.go).
//
// # Invariants
//
// Bad configuration changes nothing: Validate reports every problem at
// once, before anything starts. Whatever started is stopped, in reverse,
// when a later piece fails or the context ends.
//
// Moved here from cli/cluster.go, cli/up_nodes.go, cli/agent_cmd.go,
// cli/sim_flags.go, cli/device_plugin_cmd.go and cli/image.go (issue 25:
// a thin CLI, one assembly shared by up, the scheduler bench and the
// integration tests).
package cluster
