package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api/fabric"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/node"
	"skiff.dev/skiff/pki"
)

// Several nodes on one machine (`skiff up --nodes 3`), moved here from
// cli/up_nodes.go.
//
// Each node is a whole agent in this process: its own name (NAME-1..N,
// where NAME is --node-name or the hostname), its own data directory
// (DATA/nodes/NAME-i: pod volumes, container logs, the device plugin
// directory with its sockets and checkpoint, and for simulated GPUs the
// CDI spec and nvidia-smi files), its own GPU stack from its entry of
// --gpus, and its own runtime client whose CDI spec directories hold only
// its own spec. Two simulated DGX A100 nodes both define
// nvidia.com/gpu=0..7; since each node's runtime reads only its own spec
// directory, the names never meet. The nodes share the machine's
// containerd (and its images): each container carries the label
// skiff.dev/node, and a node adopts or removes only its own.
//
// With a CNI pod network every node has its own bridge (skiff0, skiff1,
// ...) and pod CIDR in the machine's one network namespace; the bridges
// are connected routes, so pods reach each other across nodes without
// routes, and one service proxy (the first node's) serves the whole
// machine: its rules are the same for every node.

// perNode splits a per-node flag's comma list: one value (the same for
// every node, repeated) or one per node.
func perNode(flag, spec string, nodes int) (parts []string, one bool, err error) {
	parts = strings.Split(spec, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if len(parts) == 1 {
		return slices.Repeat(parts, nodes), true, nil
	}
	if len(parts) != nodes {
		return nil, false, fmt.Errorf("--%s %q: %d values for %d nodes (give one value for all, or one per node)", flag, spec, len(parts), nodes)
	}
	return parts, false, nil
}

// nodeGPUSpecs splits --gpus into one spec per node. A single value
// applies to every node, except the machine's real GPUs (auto, nvml): they
// can belong to one node only, the first; the others get none.
func nodeGPUSpecs(spec string, nodes int) ([]string, error) {
	parts, one, err := perNode("gpus", spec, nodes)
	if err != nil {
		return nil, err
	}
	real := func(s string) bool { return s == "auto" || s == "auto-sim" || s == "nvml" || s == "" }
	if one {
		for i := 1; i < len(parts); i++ {
			switch {
			case parts[0] == "auto-sim":
				// Real GPUs (if any) on the first node, simulated on the rest.
				parts[i] = "sim:dgxa100"
			case real(parts[0]):
				parts[i] = "none"
			}
		}
		return parts, nil
	}
	seenReal := false
	for _, p := range parts {
		if real(p) {
			if seenReal {
				return nil, fmt.Errorf("--gpus %q: the machine's real GPUs (auto, nvml) can belong to one node only", spec)
			}
			seenReal = true
		}
	}
	return parts, nil
}

// nodeDevicePlugins splits --device-plugin into one value per node
// (agent.DevicePluginBuiltin or agent.DevicePluginExternal).
func nodeDevicePlugins(spec string, nodes int) ([]string, error) {
	parts, _, err := perNode("device-plugin", spec, nodes)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if err := agent.ValidateDevicePlugin(p); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// localNodeNames are the names of --nodes N nodes: base-1..base-N.
func localNodeNames(base string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", base, i+1)
	}
	return out
}

// localNodeConfigs are the configs of the --nodes nodes: one node named
// --node-name (or the hostname) with its state in the data directory, or
// NAME-1..N, each under DATA/nodes/NAME-i with a bridge of its own
// (skiff0, skiff1, ...); only the first runs the machine's routes and
// service proxy.
func localNodeConfigs(f Config, issue func(name string, addrs []string) (pki.NodeCredentials, error)) ([]node.Config, error) {
	var fab *fabric.Cluster
	if f.ClusterFile != "" {
		var err error
		if fab, err = fabric.Load(f.ClusterFile); err != nil {
			return nil, err
		}
		if fab.Nodes != f.Nodes {
			return nil, fmt.Errorf("cluster file %s: nodes: %d, but --nodes is %d", f.ClusterFile, fab.Nodes, f.Nodes)
		}
		if fab.GPUs != "" {
			f.GPUs = fab.GPUs
		}
	}
	specs, err := nodeGPUSpecs(f.GPUs, f.Nodes)
	if err != nil {
		return nil, err
	}
	plugins, err := nodeDevicePlugins(f.DevicePlugin, f.Nodes)
	if err != nil {
		return nil, err
	}
	names, dirs := []string{f.baseName()}, []string{f.DataDir}
	if f.Nodes != 1 {
		names = localNodeNames(f.baseName(), f.Nodes)
		dirs = make([]string, len(names))
		for i, name := range names {
			dirs[i] = filepath.Join(f.DataDir, "nodes", name)
		}
	}
	cfgs := make([]node.Config, len(names))
	for i, name := range names {
		c := node.DefaultConfig(dirs[i])
		c.Name, c.Runtime, c.GPUs, c.DevicePlugin = name, f.Runtime, specs[i], plugins[i]
		c.DRADynamicMIG = f.DRADynamicMIG
		if fab != nil {
			c.Labels = fab.NodeLabels(i + 1)
		}
		c.ContainerdAddress, c.ContainerdNamespace, c.RegistryHostsDir = f.ContainerdAddress, f.ContainerdNamespace, f.RegistryHostsDir
		if f.Network != "" {
			c.Network = f.Network
		}
		c.Bridge = fmt.Sprintf("skiff%d", i)
		c.NoServiceProxy = i > 0
		c.DCGMExporterListen = nodeExporterAddr(f.DCGMExporterListen, i)
		// Logs and exec for the API server's proxy, on loopback: the API
		// server runs in this process, on this machine. The node's
		// certificates come straight from the CA (no join): SANs its
		// address (the API server dials it there, or 127.0.0.1).
		c.Listen = "127.0.0.1:0"
		nodeIP := c.NodeIP
		if nodeIP == "" {
			nodeIP = agent.DefaultConfig().NodeIP
		}
		creds, err := issue(name, []string{nodeIP})
		if err != nil {
			return nil, err
		}
		c.Credentials = &creds
		cfgs[i] = c
	}
	return cfgs, nil
}

// startLocalNodes starts the --nodes nodes in this process against the
// control plane, waits until each is Ready, and prints what each has and,
// in one line, which labs cannot work on them. On error none is left
// running.
func startLocalNodes(ctx context.Context, f *Config, cp *controlplane.ControlPlane, start time.Time) ([]*node.Node, error) {
	out, lg := f.out(), f.log()
	cfgs, err := localNodeConfigs(*f, cp.IssueNodeCredentials)
	if err != nil {
		return nil, err
	}
	var nodes []*node.Node
	fail := func(err error) ([]*node.Node, error) { _ = stopNodes(nodes); return nil, err }
	for _, c := range cfgs {
		c.Metrics, c.Log = cp.Metrics(), lg
		n, err := node.Start(ctx, c, cp.Local())
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, n)
		if len(cfgs) == 1 {
			fmt.Fprintln(out, n.Info().GPUs)
		}
	}
	for _, n := range nodes {
		if err := n.WaitReady(ctx, 30*time.Second); err != nil {
			return fail(err)
		}
	}
	info := nodes[0].Info()
	if !info.Simulated {
		// `skiff image import` on this machine finds the nodes' containerd.
		if err := RecordContainerd(Containerd{Address: f.ContainerdAddress, Namespace: f.ContainerdNamespace}); err != nil {
			lg.Warn("record the node's containerd for skiff image", "err", err)
		}
	}
	if len(nodes) == 1 {
		printNote(out, info.NetworkNote)
		fmt.Fprintf(out, "node %s is Ready (%s) after %d ms\n", info.Name, info.Runtime, time.Since(start).Milliseconds())
	} else {
		fmt.Fprintf(out, "%d nodes are Ready (%s) after %d ms:\n", len(nodes), info.Runtime, time.Since(start).Milliseconds())
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name()
		}
		for i, n := range nodes {
			fmt.Fprintf(out, "  %-*s --gpus %-12s %s\n", maxLen(names), n.Name(), cfgs[i].GPUs, firstLine(n.Info().GPUs))
		}
		fmt.Fprintf(out, "Choose other GPUs per node with --gpus, one value for all or one per node, e.g. --nodes %d --gpus %s\n", len(nodes), exampleGPUs(len(nodes)))
		if info.NetworkNote != "" && info.PodNetwork == node.NetworkCNI {
			info.NetworkNote += "; one bridge per node (skiff0, skiff1, ...)"
		}
		printNote(out, info.NetworkNote)
	}
	printNote(out, info.RuntimeNote)
	printNote(out, info.Limits)
	return nodes, nil
}

func printNote(out io.Writer, s string) {
	if s != "" {
		fmt.Fprintln(out, s)
	}
}

// waitNodes blocks until ctx ends (nil) or a node's agent ends by itself
// (its error).
func waitNodes(ctx context.Context, nodes []*node.Node) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			select {
			case <-n.Done():
				err := n.Err()
				if err == nil {
					err = errors.New("stopped by itself")
				}
				failed <- fmt.Errorf("node %s: agent: %w", n.Name(), err)
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// stopNodes stops every node (in reverse order) and joins their errors.
func stopNodes(nodes []*node.Node) error {
	var errs []error
	for i := len(nodes) - 1; i >= 0; i-- {
		errs = append(errs, nodes[i].Stop())
	}
	return errors.Join(errs...)
}

func maxLen(ss []string) int {
	m := 0
	for _, s := range ss {
		m = max(m, len(s))
	}
	return m
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// exampleGPUs is a --gpus value for n nodes: DGX A100s and one without.
func exampleGPUs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "sim:dgxh100"
	}
	parts[n-1] = "none"
	return strings.Join(parts, ",")
}

// StartNode starts a node against c (node.Start) and waits, up to ready,
// until its Node is Ready, so that a first pod does not meet a cluster
// without nodes (and the scheduler's backoff). On error the node is
// stopped. The integration tests start their nodes here.
func StartNode(ctx context.Context, cfg node.Config, c client.Interface, ready time.Duration) (*node.Node, error) {
	n, err := node.Start(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx, ready); err != nil {
		_ = n.Stop()
		return nil, err
	}
	return n, nil
}

// nodeExporterAddr is local node i's DCGM exporter address: addr for the
// first, its port + i for the others (they share the machine); "" none.
func nodeExporterAddr(addr string, i int) string {
	if addr == "" || i == 0 {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 {
		return addr // 0: a free port each
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i))
}
