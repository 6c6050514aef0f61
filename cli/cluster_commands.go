package cli

import "github.com/spf13/cobra"

// clusterCommands returns the commands Main adds to the kubectl verbs of
// NewRoot, those that need a whole cluster (or are one): the processes of
// package cluster, up, server (with remove-member: member.go), agent and
// device-plugin, and version (cluster.go, agent_cmd.go,
// device_plugin_cmd.go); logs, exec, attach and port-forward, which reach
// the node agents through the API server (logs.go, exec.go, attach.go,
// port_forward.go); the node verbs cordon, uncordon, drain, taint and
// label (cordon.go, taint.go, label.go) and gpu fault (gpu_cmd.go); image
// (image.go), snapshot (snapshot.go), kubeconfig (kubeconfig.go),
// classroom (classroom.go), which issue users' certificates, reset
// (reset.go), and scenario (scenario.go), which runs clusters of its own.
func (r *Root) clusterCommands() []*cobra.Command {
	return []*cobra.Command{newUpCmd(r), withMemberCmds(newServerCmd(r), r), newVersionCmd(r), newAgentCmd(r), newLogsCmd(r), newExecCmd(r), newAttachCmd(r), newPortForwardCmd(r),
		newCordonCmd(r), newUncordonCmd(r), newDrainCmd(r), newTaintCmd(r), newLabelCmd(r), newDevicePluginCmd(r), newGPUCmd(r), newImageCmd(r),
		newSnapshotCmd(r), newKubeconfigCmd(r), newClassroomCmd(r), newResetCmd(r), newScenarioCmd(r)}
}
