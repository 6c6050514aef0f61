package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/agent/proxy"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// cniBridgePaths are where auto looks for the CNI bridge plugin (Debian's
// containernetworking-plugins, upstream's release tarball).
var cniBridgePaths = []string{"/usr/lib/cni/bridge", "/opt/cni/bin/bridge"}

// ResolveNetwork turns Config.Network into NetworkNone or NetworkCNI for a
// node whose runtime is simulated or not; note says, for auto, what was
// chosen and why (with the command that gives a pod network when none).
func ResolveNetwork(mode string, simulated bool) (resolved, note string, err error) {
	switch mode {
	case NetworkNone, NetworkCNI:
		return mode, "", nil
	case "", NetworkAuto:
	default:
		return "", "", fmt.Errorf("network %q: want %s, %s or %s", mode, NetworkAuto, NetworkCNI, NetworkNone)
	}
	const fix = "sudo ./hack/up.sh, or sudo apt-get install -y containernetworking-plugins iptables"
	switch {
	case simulated:
		return NetworkNone, "pod network: none (simulated pods have no processes to network)", nil
	case os.Geteuid() != 0:
		return NetworkNone, "pod network: none, pods share the node's network (not root; run as root for a network namespace and IP per pod, and Services)", nil
	}
	bridge := false
	for _, p := range cniBridgePaths {
		if _, err := os.Stat(p); err == nil {
			bridge = true
		}
	}
	if !bridge {
		return NetworkNone, "pod network: none, pods share the node's network (no CNI plugins: " + fix + ")", nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return NetworkNone, "pod network: none, pods share the node's network (no iptables for the service proxy: " + fix + ")", nil
	}
	return NetworkCNI, "pod network: cni (a network namespace and IP per pod; service proxy on iptables)", nil
}

// podNetwork is the node's pod network: nil for none. With cni, the CNI
// state lives under the data directory and the node's pod CIDR is read
// from its Node (the control plane's node IPAM controller allocates it
// after registration).
func podNetwork(cfg Config, c client.Interface, simulated bool) (pn podworker.Network, mode, note string, err error) {
	mode, note, err = ResolveNetwork(cfg.Network, simulated)
	if err != nil || mode == NetworkNone {
		return nil, mode, note, err
	}
	nc := nodeNetworkConfig(cfg.DataDir, cfg.Bridge, cfg.NetNS)
	return network.NewNode(nc, nodePodCIDR(c, cfg.Name)), mode, note, nil
}

// nodeNetworkConfig is the pod network of a node with its state in
// dataDir (without the pod CIDR, known later): Start and Reset agree on it.
func nodeNetworkConfig(dataDir, bridge string, netns *NetNS) network.Config {
	nc := network.DefaultConfig("")
	if bridge != "" {
		nc.Bridge = bridge
	}
	nc.CacheDir = filepath.Join(dataDir, "cni", "cache")
	nc.IPAMDataDir = filepath.Join(dataDir, "cni", "networks")
	nc.ConfFile = filepath.Join(dataDir, "cni", "net.d", network.ConfFileName)
	if netns != nil {
		nc.Wrap = netns.Wrap
		if netns.PodPrefix != "" {
			nc.NetNSPrefix = netns.PodPrefix
		}
	}
	return nc
}

// nodePodCIDR reads a node's pod CIDR from the API ("" until the node is
// registered and the node IPAM controller has given it one).
func nodePodCIDR(c client.Interface, nodeName string) network.PodCIDRFunc {
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

// startNodeNetwork runs the routes to the other nodes' pod CIDRs and the
// service proxy until ctx ends, inside netns when it is set; the returned
// func waits for both to finish removing what they installed.
func startNodeNetwork(ctx context.Context, c client.Interface, nodeName string, netns *NetNS, lg *slog.Logger) (wait func()) {
	var wg sync.WaitGroup
	var wrap []string
	if netns != nil {
		wrap = netns.Wrap
	}
	routes := network.NewRoutes(c, nodeName, wrap, lg)
	pcfg := proxy.DefaultConfig()
	pcfg.Wrap, pcfg.Log = wrap, lg
	px := proxy.New(c, pcfg)
	dnsRun := func(ctx context.Context) error { return runClusterDNS(ctx, c, netns, lg) } // dns.go
	for name, run := range map[string]func(context.Context) error{"routes": routes.Run, "service proxy": px.Run, "cluster DNS": dnsRun} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				lg.Warn("node network stopped", "part", name, "err", err)
			}
		}()
	}
	return wg.Wait
}

// waitNodeReady waits until the node's Ready condition is True or ctx ends.
func waitNodeReady(ctx context.Context, c client.Interface, name string) error {
	kind := api.MustKindOf(&api.Node{})
	w, err := c.Watch(ctx, kind, "", api.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return fmt.Errorf("watch node %s: %w", name, err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		if n, ok := ev.Object.(*api.Node); ok && nodeReady(n) {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("wait for node %s to turn Ready: %w", name, err)
	}
	if err := w.Err(); err != nil {
		return err
	}
	return errors.New("watch ended before the node turned Ready")
}

func nodeReady(n *api.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}
