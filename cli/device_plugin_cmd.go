package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
)

// devicePluginCmd runs the built-in GPU device plugin on its own, as a
// separate process, the way NVIDIA's device plugin runs beside a kubelet.
type devicePluginCmd struct {
	r         *Root
	gpus      string
	pluginDir string
	nodeName  string
}

func newDevicePluginCmd(r *Root) *cobra.Command {
	d := &devicePluginCmd{r: r}
	cmd := &cobra.Command{
		Use:   "device-plugin",
		Short: "Run the GPU device plugin alone: it registers nvidia.com/gpu with the node's device manager (kubelet.sock)",
		Long: `Run skiff's GPU device plugin as its own process. It serves the device plugin
API v1beta1 on nvidia-gpu.sock in the plugin directory and registers with the
device manager's kubelet.sock there, exactly as NVIDIA's plugin registers with a
kubelet; it registers again when the agent restarts.

The agent runs this plugin in its own process by default; this command is for
watching the Register → ListAndWatch → Allocate sequence on its own.`,
		Example: `  skiff device-plugin --gpus sim:dgxa100 --plugin-dir ~/.skiff/data/device-plugins`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return d.Run(cmd.Context()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&d.gpus, "gpus", "auto", "GPUs to advertise: auto, nvml, sim:dgxa100|dgxh100|dgxh200|dgxb200|rtx4090x4, or sim:FILE.yaml")
	fl.StringVar(&d.pluginDir, "plugin-dir", devices.DefaultDir, "the device plugin directory, where the agent's kubelet.sock is")
	fl.StringVar(&d.nodeName, "node-name", "", "node name that seeds simulated GPU UUIDs (must match the agent's; default: the hostname)")
	return cmd
}

// Run serves the plugin until ctx ends.
func (d *devicePluginCmd) Run(ctx context.Context) error {
	lg := d.r.Logger()
	node := d.nodeName
	if node == "" {
		node = agent.DefaultConfig().NodeName
	}
	src, msg, err := gpu.Open(d.gpus, gpu.Options{NodeName: node, Logger: lg})
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintln(d.r.Stdout, msg)
	if devs, err := src.Devices(ctx); err != nil || len(devs) == 0 {
		return errors.New("no GPUs to advertise")
	}
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: d.pluginDir, Log: lg})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.r.Stdout, "serving %s on %s; registering with %s\n", gpuplugin.ResourceName, p.SocketPath(), d.pluginDir+"/"+devices.SocketName)
	return p.Run(ctx)
}
