package cli

import "github.com/spf13/cobra"

// serverCommands returns the commands that run cluster components: up,
// server and version (cluster.go), agent (agent_cmd.go); and logs, exec and
// port-forward (logs.go, exec.go, port_forward.go), which reach the node agents through the API server;
// and gpu fault (gpu_cmd.go), through the nodes/proxy subresource; snapshot (snapshot.go); server remove-member (member.go).
func (r *Root) serverCommands() []*cobra.Command {
	return []*cobra.Command{newUpCmd(r), withMemberCmds(newServerCmd(r), r), newVersionCmd(r), newAgentCmd(r), newLogsCmd(r), newExecCmd(r), newAttachCmd(r), newPortForwardCmd(r),
		newCordonCmd(r), newUncordonCmd(r), newDrainCmd(r), newTaintCmd(r), newLabelCmd(r), newDevicePluginCmd(r), newGPUCmd(r), newImageCmd(r),
		newSnapshotCmd(r), newKubeconfigCmd(r)}
}
