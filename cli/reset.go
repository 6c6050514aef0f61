package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/node"
)

// resetCmd is `skiff reset`, as `kubeadm reset` and k3s-killall.sh: the
// work is node.Reset's; this command parses and prints.
type resetCmd struct {
	r             *Root
	dataDir       string
	removeDataDir bool
}

func newResetCmd(r *Root) *cobra.Command { return (&resetCmd{r: r}).command() }

func (rc *resetCmd) command() *cobra.Command {
	home, _ := os.UserHomeDir()
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Stop and remove what skiff left on this machine: containers, pod network, iptables rules (and with --remove-data-dir, its data)",
		Long: `Clean this machine of what skiff's nodes made, as kubeadm reset and
k3s-killall.sh do. Ctrl-C on skiff up leaves the pods' containers running
on purpose (the next skiff up adopts them); skiff reset removes them:

  - the nodes' containers, in skiff's containerd namespace (ctr -n skiff c ls);
  - the pods' network: their network namespaces (ip netns), their addresses
    (host-local IPAM) and CNI rules, the bridge (skiff0, ...);
  - the service proxy's iptables chains (SKIFF-*, nat table) and the routes to
    other nodes' pods;
  - the plugin sockets' directory in /tmp (skiff-sock-*) of a node whose data
    directory is too deep for unix socket paths;
  - with --remove-data-dir, the data directory itself: the cluster's objects,
    CA, token and pod volumes. Without it they stay, and the next skiff up
    starts the same cluster again.

It prints each thing it removed and refuses while skiff runs on the data
directory. Run it as root, as skiff up with real containers ran:

  sudo skiff reset                          # skiff up's ~/.skiff/data
  sudo skiff reset --data-dir ~/.skiff/agent  # a skiff agent's`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed, err := node.Reset(cmd.Context(), node.ResetConfig{DataDir: rc.dataDir, RemoveDataDir: rc.removeDataDir,
				Say: func(s string) { fmt.Fprintln(rc.r.Stdout, s) }})
			if err != nil {
				return err
			}
			if !removed {
				fmt.Fprintf(rc.r.Stdout, "nothing to remove: no skiff containers, pod network or iptables rules of %s on this machine\n", rc.dataDir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rc.dataDir, "data-dir", filepath.Join(home, ".skiff", "data"), "the data directory of the skiff up, server or agent to clean up after")
	cmd.Flags().BoolVar(&rc.removeDataDir, "remove-data-dir", false, "also delete the data directory: the cluster's objects, CA, token and pod volumes (cannot be undone)")
	return cmd
}
