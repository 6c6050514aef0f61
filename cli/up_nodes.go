package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/client"
)

// Several nodes on one machine (`skiff up --nodes 3`).
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

// nodeGPUSpecs splits --gpus into one spec per node. A single value
// applies to every node, except the machine's real GPUs (auto, nvml): they
// can belong to one node only, the first; the others get none.
func nodeGPUSpecs(spec string, nodes int) ([]string, error) {
	parts := strings.Split(spec, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	real := func(s string) bool { return s == "auto" || s == "auto-sim" || s == "nvml" || s == "" }
	if len(parts) == 1 {
		out := make([]string, nodes)
		for i := range out {
			out[i] = parts[0]
			if i > 0 && real(parts[0]) {
				out[i] = "none"
			}
			if i > 0 && parts[0] == "auto-sim" {
				// Real GPUs (if any) on the first node, simulated on the rest.
				out[i] = "sim:dgxa100"
			}
		}
		return out, nil
	}
	if len(parts) != nodes {
		return nil, fmt.Errorf("--gpus %q: %d values for %d nodes (give one value for all, or one per node)", spec, len(parts), nodes)
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

// localNodeNames are the names of --nodes N nodes: base-1..base-N.
func localNodeNames(base string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", base, i+1)
	}
	return out
}

// localNode is one running in-process node of startLocalNodes.
type localNode struct {
	name  string
	gpus  string // the node's one-line GPU summary
	done  chan error
	close func()
}

// startLocalNodes starts f.nodes agents in this process against the
// control plane's client c, waits until each is Ready, and prints which
// node has which GPUs. stop cancels them all and waits; errc reports the
// first agent that ended by itself.
func startLocalNodes(ctx context.Context, out io.Writer, f clusterFlags, c client.Interface, token string, metrics client.LoopMetrics, lg *slog.Logger, start time.Time) (stop func(), errc <-chan error, err error) {
	if f.nodes < 1 {
		return nil, nil, fmt.Errorf("--nodes %d: want at least 1", f.nodes)
	}
	base := f.nodeName
	if base == "" {
		base = agent.DefaultConfig().NodeName
	}
	names := localNodeNames(base, f.nodes)
	specs, err := nodeGPUSpecs(f.gpus, f.nodes)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var nodes []*localNode
	first := make(chan error, 1)
	stop = func() {
		cancel()
		for _, n := range nodes {
			<-n.done
			n.close()
		}
	}
	fail := func(err error) (func(), <-chan error, error) { stop(); return nil, nil, err }

	var proxyStarted bool
	var netWhy string
	mode := "containerd"
	var runtimeWhy string
	for i, name := range names {
		nf := f
		nf.dataDir = filepath.Join(f.dataDir, "nodes", name)
		nf.cdiDirs = nil
		if err := os.MkdirAll(nf.dataDir, 0o700); err != nil {
			return fail(fmt.Errorf("node %s: data dir: %w", name, err))
		}
		gpus, err := agent.SetUpGPUs(ctx, agent.GPUConfig{Spec: specs[i], NodeName: name, DataDir: nf.dataDir, Log: lg})
		if err != nil {
			return fail(fmt.Errorf("node %s: %w", name, err))
		}
		if gpus.CDISpecDir != "" {
			nf.cdiDirs = []string{gpus.CDISpecDir}
		}
		rt, simulated, why, err := openRuntime(ctx, nf, lg)
		if err != nil {
			gpus.Close()
			return fail(fmt.Errorf("node %s: %w", name, err))
		}
		if simulated {
			mode = "simulated runtime, no processes"
		}
		runtimeWhy = why
		acfg := agent.DefaultConfig()
		acfg.NodeName, acfg.DataDir, acfg.Simulated, acfg.Log, acfg.Metrics = name, nf.dataDir, simulated, lg.With("node", name), metrics
		acfg.Listen, acfg.Token = "127.0.0.1:0", token
		var pn podworker.Network
		pn, netWhy, err = localNodeNetwork(nf, c, name, i, simulated)
		if err != nil {
			rt.Close()
			gpus.Close()
			return fail(err)
		}
		acfg.Network = pn
		gpus.Configure(&acfg)
		a, err := agent.New(acfg, c, rt)
		if err != nil {
			rt.Close()
			gpus.Close()
			return fail(fmt.Errorf("node %s: %w", name, err))
		}
		n := &localNode{name: name, gpus: gpus.Message, done: make(chan error, 1), close: func() { rt.Close(); gpus.Close() }}
		// One service proxy (and route keeper) for the machine: its
		// rules do not depend on the node.
		waitNet := func() {}
		var stopNet context.CancelFunc = func() {}
		if pn != nil && !proxyStarted {
			var netCtx context.Context
			netCtx, stopNet = context.WithCancel(ctx)
			waitNet = startNodeNetwork(netCtx, pn, c, name, lg)
			proxyStarted = true
		}
		go func() {
			err := a.Run(ctx)
			stopNet()
			waitNet()
			if err != nil && ctx.Err() == nil {
				select {
				case first <- fmt.Errorf("node %s: %w", name, err):
				default:
				}
			}
			n.done <- err
		}()
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		if err := waitNodeReady(ctx, c, n.name, 30*time.Second); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(out, "%d nodes are Ready (%s) after %d ms:\n", len(nodes), mode, time.Since(start).Milliseconds())
	for i, n := range nodes {
		fmt.Fprintf(out, "  %-*s --gpus %-12s %s\n", maxLen(names), n.name, specs[i], firstLine(n.gpus))
	}
	fmt.Fprintf(out, "Choose other GPUs per node with --gpus, one value for all or one per node, e.g. --nodes %d --gpus %s\n", len(nodes), exampleGPUs(len(nodes)))
	if netWhy != "" {
		fmt.Fprintln(out, netWhy)
	}
	if runtimeWhy != "" {
		fmt.Fprintln(out, runtimeWhy)
	}
	return stop, first, nil
}

// localNodeNetwork is node i's pod network: nil for none; with cni, a
// bridge of its own (skiff<i>) and CNI state in its data directory.
func localNodeNetwork(f clusterFlags, c client.Interface, name string, i int, simulated bool) (podworker.Network, string, error) {
	mode, why, err := resolveNetwork(f.network, simulated)
	if err != nil {
		return nil, "", err
	}
	if mode == networkNone {
		return nil, why, nil
	}
	cfg := network.DefaultConfig("")
	cfg.Bridge = fmt.Sprintf("skiff%d", i)
	cfg.CacheDir = filepath.Join(f.dataDir, "cni", "cache")
	cfg.IPAMDataDir = filepath.Join(f.dataDir, "cni", "networks")
	if why != "" {
		why += "; one bridge per node (skiff0, skiff1, ...)"
	}
	return network.NewNode(cfg, nodePodCIDR(c, name)), why, nil
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
