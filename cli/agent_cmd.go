package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/cluster"
)

// agentCmd runs a node agent that joins an existing cluster: the join, the
// TLS bootstrap and the node are package cluster's (Agent).
type agentCmd struct {
	r         *Root
	cfg       cluster.AgentConfig
	tokenFile string
}

func newAgentCmd(r *Root) *cobra.Command {
	a := &agentCmd{r: r, cfg: cluster.DefaultAgentConfig()}
	cmd := &cobra.Command{
		Use:   "agent --join HOST[:PORT] --token-file FILE --discovery-token-ca-cert-hash sha256:HEX",
		Short: "Run a node agent that joins a cluster through any of its members",
		Long: `Run a node agent (the kubelet of a skiff cluster) on this machine and join the
cluster that HOST belongs to. HOST is any member: the server, or another agent;
PORT is its gossip port (default 7946). The agent learns the API server's
address from gossip, registers this machine as a Node and runs the pods the
scheduler binds to it.

The join token is the server's DATA-DIR/join-token: copy the file here and
pass --token-file, or set $` + cluster.JoinTokenEnv + ` (never the token on the command
line, where ps shows it). Gossip is encrypted with a key derived from it: with
a wrong token the join fails.

The CA pin (--discovery-token-ca-cert-hash, as kubeadm's) is what ` + "`skiff server`" + `
printed: the agent fetches the cluster CA from the API server, refuses to go on
when its hash differs (someone else answered), then asks, verifying the server
against that CA, for its certificates (CN system:node:NAME) and keeps them in
its data dir (pki/); a restarted agent reuses them.`,
		Example: `  skiff agent --join 10.0.0.1 --token-file ./join-token --discovery-token-ca-cert-hash sha256:8f4e...`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.Context()) },
	}
	home, _ := os.UserHomeDir()
	c := &a.cfg
	fl := cmd.Flags()
	fl.StringVar(&c.Join, "join", "", "a member of the cluster to join: HOST or HOST:PORT (required)")
	fl.StringVar(&a.tokenFile, "token-file", "", "file holding the join token (a copy of the server's DATA-DIR/join-token); default $"+cluster.JoinTokenEnv)
	fl.StringVar(&c.CAHash, "discovery-token-ca-cert-hash", "", "the cluster CA's pin, sha256:HEX, as `skiff server` printed it (required unless --discovery-token-unsafe-skip-ca-verification)")
	fl.BoolVar(&c.UnsafeSkipCA, "discovery-token-unsafe-skip-ca-verification", false, "trust whatever CA the API server presents (no pin); only on a network you trust")
	fl.StringVar(&c.NodeName, "node-name", "", "name of this node (default: the hostname)")
	fl.StringVar(&c.Runtime, "runtime", c.Runtime, "container runtime: auto (containerd when reachable, else simulated), containerd, or fake (simulated, no processes)")
	fl.StringVar(&c.ContainerdAddress, "containerd-address", c.ContainerdAddress, "containerd socket")
	fl.StringVar(&c.DataDir, "data-dir", filepath.Join(home, ".skiff", "agent"), "where the agent keeps pod volumes and container logs")
	fl.IntVar(&c.GossipPort, "gossip-port", c.GossipPort, "gossip port of this agent (UDP and TCP)")
	fl.StringVar(&c.Advertise, "advertise-address", "", "address other machines reach this node at (default: the address of the default route)")
	fl.StringVar(&c.ListenAgent, "listen-agent", c.ListenAgent, "address of the agent's logs/exec server (host:port), which the API server calls")
	fl.StringVar(&c.DCGMExporterListen, "dcgm-exporter-listen", c.DCGMExporterListen, "address of the node's DCGM-exporter-compatible metrics (Prometheus text at /metrics, dcgm-exporter's series and labels); \"\" for none")
	fl.DurationVar(&c.JoinTimeout, "join-timeout", c.JoinTimeout, "how long to wait for gossip to name the API server")
	fl.StringVar(&c.GPUs, "gpus", c.GPUs, "GPUs of this node: auto (real when the NVIDIA driver loads, else none), nvml, none, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml")
	fl.StringVar(&c.DevicePluginConfig, "device-plugin-config", c.DevicePluginConfig, "ConfigMap of NVIDIA device plugin configs (GPU sharing, MIG strategy): NAME in kube-system, or NAMESPACE/NAME; the node label nvidia.com/device-plugin.config picks the key, else \"default\"")
	fl.StringVar(&c.DevicePlugin, "device-plugin", c.DevicePlugin, "GPU device plugin of this node: builtin (the agent runs skiff's) or external (none: a device plugin pod, e.g. examples/workloads/skiff-device-plugin-daemonset.yaml, registers through the hostPath /var/lib/kubelet/device-plugins and gives the node its nvidia.com/gpu)")
	fl.BoolVar(&c.DRADynamicMIG, "dra-dynamic-mig", false, "the gpu.nvidia.com DRA driver publishes each MIG-capable GPU as partitionable devices (a counter set, one device per MIG placement, for DeviceClass mig.nvidia.com) and creates the MIG device when a claim is prepared, as NVIDIA's driver with featureGates.DynamicMIG=true; simulated GPUs only")
	fl.StringVar(&c.Network, "network", c.Network, networkFlagHelp)
	fl.StringVar(&c.ContainerdNamespace, "containerd-namespace", c.ContainerdNamespace, "containerd namespace of skiff's images and containers")
	fl.StringVar(&c.RegistryHostsDir, "registry-hosts-dir", c.RegistryHostsDir, "containerd's registry hosts directory (as its CRI plugin's registry config_path): DIR/HOST/hosts.toml names mirrors of HOST, e.g. a lab room's local registry for registry.k8s.io")
	_ = cmd.MarkFlagRequired("join")
	return cmd
}

// Run joins the cluster and runs the node until ctx ends.
func (a *agentCmd) Run(ctx context.Context) error {
	cfg := a.cfg
	cfg.Log, cfg.Out = a.r.Logger(), a.r.Stdout
	token, err := readTokenFlag(a.tokenFile, cluster.JoinTokenEnv)
	if err != nil {
		return err
	}
	cfg.Token = token
	var errs []error
	if token == "" {
		errs = append(errs, fmt.Errorf("no join token: pass --token-file (a copy of the server's DATA-DIR/join-token) or set $%s", cluster.JoinTokenEnv))
	}
	if cfg.CAHash == "" && !cfg.UnsafeSkipCA {
		errs = append(errs, errors.New("no --discovery-token-ca-cert-hash: give the sha256:... pin `skiff server` printed (or, on a trusted network only, --discovery-token-unsafe-skip-ca-verification)"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return err // bad flags change nothing: not even a gossip join
	}
	return cluster.Agent(ctx, cfg)
}
