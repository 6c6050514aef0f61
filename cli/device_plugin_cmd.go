package cli

import (
	"context"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/cluster"
)

// devicePluginCmd runs the built-in GPU device plugin on its own, as a
// separate process, the way NVIDIA's device plugin runs beside a kubelet
// (cluster.DevicePlugin).
type devicePluginCmd struct {
	r   *Root
	cfg cluster.DevicePluginConfig
}

func newDevicePluginCmd(r *Root) *cobra.Command {
	d := &devicePluginCmd{r: r, cfg: cluster.DefaultDevicePluginConfig()}
	cmd := &cobra.Command{
		Use:   "device-plugin",
		Short: "Run the GPU device plugin alone: it registers nvidia.com/gpu with the node's device manager (kubelet.sock)",
		Long: `Run skiff's GPU device plugin as its own process. It serves the device plugin
API v1beta1 on nvidia-gpu.sock in the plugin directory and registers with the
device manager's kubelet.sock there, exactly as NVIDIA's plugin registers with a
kubelet; it registers again when the agent restarts.

The agent runs this plugin in its own process unless it was started with
--device-plugin=external. Then this command is the node's device plugin: as a
DaemonSet pod (examples/workloads/skiff-device-plugin-daemonset.yaml, image from
` + "`skiff image self`" + `), whose hostPath /var/lib/kubelet/device-plugins is the
node's DATA-DIR/device-plugins, or as a process beside the agent with
--plugin-dir. --gpus and --node-name must be the agent's: simulated GPUs' UUIDs
come from the node name.`,
		Example: `  skiff device-plugin --gpus sim:dgxa100 --plugin-dir ~/.skiff/data/device-plugins
  skiff device-plugin --gpus sim:dgxa100 --node-name "$NODE_NAME"   # in a pod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return d.Run(cmd.Context()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&d.cfg.GPUs, "gpus", d.cfg.GPUs, "GPUs to advertise: auto, nvml, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml")
	fl.StringVar(&d.cfg.PluginDir, "plugin-dir", d.cfg.PluginDir, "the device plugin directory, where the agent's kubelet.sock is (in a pod: the hostPath /var/lib/kubelet/device-plugins, the default)")
	fl.StringVar(&d.cfg.NodeName, "node-name", "", "node name that seeds simulated GPU UUIDs (must match the agent's; default: the hostname)")
	return cmd
}

// Run serves the plugin until ctx ends.
func (d *devicePluginCmd) Run(ctx context.Context) error {
	cfg := d.cfg
	cfg.Log, cfg.Out = d.r.Logger(), d.r.Stdout
	return cluster.DevicePlugin(ctx, cfg)
}
