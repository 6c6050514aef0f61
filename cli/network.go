package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/agent/proxy"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Values of --network.
const (
	// networkAuto: cni when it can work (root, the CNI bridge plugin
	// installed, real containers), else none; the startup output says
	// which.
	networkAuto = "auto"
	// networkNone: pods share the node's network namespace and report the
	// node's IP; no service proxy.
	networkNone = "none"
	// networkCNI: every pod gets its own network namespace and an IP from
	// the node's pod CIDR, through the CNI plugins (agent/network); the
	// node routes to other nodes' pod CIDRs and runs the service proxy
	// (agent/proxy).
	networkCNI = "cni"
)

// networkFlagHelp is the help of --network on up, server and agent.
const networkFlagHelp = "pod network of the local node: auto (cni when running as root with the CNI plugins in /usr/lib/cni and containerd, else none), none (pods share the node's network), or cni (a namespace and IP per pod, routes between nodes, and the service proxy; needs root)"

// cniBridgePlugin is the plugin whose presence auto looks for.
var cniBridgePaths = []string{"/usr/lib/cni/bridge", "/opt/cni/bin/bridge"}

// resolveNetwork turns --network into none or cni; why says, for auto,
// what was chosen and why.
func resolveNetwork(mode string, simulated bool) (resolved, why string, err error) {
	switch mode {
	case networkNone, networkCNI:
		return mode, "", nil
	case "", networkAuto:
	default:
		return "", "", fmt.Errorf("--network %q: want %s, %s or %s", mode, networkAuto, networkCNI, networkNone)
	}
	switch {
	case simulated:
		return networkNone, "pod network: none (simulated pods have no processes to network)", nil
	case os.Geteuid() != 0:
		return networkNone, "pod network: none, pods share the node's network (not root; run as root for a network namespace and IP per pod, and Services)", nil
	}
	for _, p := range cniBridgePaths {
		if _, err := os.Stat(p); err == nil {
			return networkCNI, "pod network: cni (a network namespace and IP per pod on bridge skiff0; service proxy on iptables)", nil
		}
	}
	return networkNone, "pod network: none, pods share the node's network (no CNI plugins: sudo apt-get install -y containernetworking-plugins)", nil
}

// podNetwork is the local node's pod network chosen by --network: nil for
// "none". With "cni", the CNI state lives under the data directory and
// the node's pod CIDR is read from its Node (the control plane's node IPAM
// controller allocates it after registration). why is what to print.
func (f *clusterFlags) podNetwork(c client.Interface, nodeName string, simulated bool) (podworker.Network, string, error) {
	mode, why, err := resolveNetwork(f.network, simulated)
	if err != nil {
		return nil, "", err
	}
	if mode == networkNone {
		return nil, why, nil
	}
	cfg := network.DefaultConfig("")
	cfg.CacheDir = filepath.Join(f.dataDir, "cni", "cache")
	cfg.IPAMDataDir = filepath.Join(f.dataDir, "cni", "networks")
	return network.NewNode(cfg, nodePodCIDR(c, nodeName)), why, nil
}

// nodePodCIDR reads a node's pod CIDR from the API ("" until the node is
// registered and the node IPAM controller has given it one).
func nodePodCIDR(c client.Interface, nodeName string) func(ctx context.Context) (string, error) {
	nodes := api.MustKindOf(&api.Node{})
	return func(ctx context.Context) (string, error) {
		o, err := c.Get(ctx, nodes, "", nodeName)
		if api.IsNotFound(err) {
			return "", nil // not registered yet
		}
		if err != nil {
			return "", err
		}
		return o.(*api.Node).Spec.PodCIDR, nil
	}
}

// startNodeNetwork runs, for a node with a CNI pod network, the routes to
// the other nodes' pod CIDRs and the service proxy, until ctx ends; the
// returned func waits for both to finish removing what they installed.
// With no pod network it does nothing.
func startNodeNetwork(ctx context.Context, pn podworker.Network, c client.Interface, nodeName string, lg *slog.Logger) (wait func()) {
	if pn == nil {
		return func() {}
	}
	var wg sync.WaitGroup
	routes := network.NewRoutes(c, nodeName, nil, lg)
	pcfg := proxy.DefaultConfig()
	pcfg.Log = lg
	px := proxy.New(c, pcfg)
	for name, run := range map[string]func(context.Context) error{"routes": routes.Run, "service proxy": px.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				lg.Warn(name+" stopped", "err", err)
			}
		}()
	}
	return wg.Wait
}
