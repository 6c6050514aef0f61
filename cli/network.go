package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Values of --network.
const (
	// networkNone: pods share the node's network namespace and report the
	// node's IP (the default for now, until the service proxy exists).
	networkNone = "none"
	// networkCNI: every pod gets its own network namespace and an IP from
	// the node's pod CIDR, through the CNI plugins (agent/network).
	networkCNI = "cni"
)

// podNetwork is the local node's pod network chosen by --network: nil for
// "none". With "cni", the CNI state lives under the data directory and
// the node's pod CIDR is read from its Node (the control plane's node IPAM
// controller allocates it after registration).
func (f *clusterFlags) podNetwork(c client.Interface, nodeName string) (podworker.Network, error) {
	switch f.network {
	case "", networkNone:
		return nil, nil
	case networkCNI:
		cfg := network.DefaultConfig("")
		cfg.CacheDir = filepath.Join(f.dataDir, "cni", "cache")
		cfg.IPAMDataDir = filepath.Join(f.dataDir, "cni", "networks")
		nodes := api.MustKindOf(&api.Node{})
		return network.NewNode(cfg, func(ctx context.Context) (string, error) {
			o, err := c.Get(ctx, nodes, "", nodeName)
			if api.IsNotFound(err) {
				return "", nil // not registered yet
			}
			if err != nil {
				return "", err
			}
			return o.(*api.Node).Spec.PodCIDR, nil
		}), nil
	default:
		return nil, fmt.Errorf("--network %q: want %s or %s", f.network, networkCNI, networkNone)
	}
}
