package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/cluster"
)

// removeMemberCmd takes a server's etcd member out of a cluster on
// embedded etcd, for good: the way to replace a server whose machine is
// lost (docs/stores.md). It asks the running server of the CLI config
// (DELETE api.MemberPath(NAME), with the token), which removes the
// member and the server's record; etcd's own check refuses a removal that
// would break the quorum of the members left, which the server answers
// with 503, and the command asks again until --timeout.
type removeMemberCmd struct {
	r       *Root
	timeout time.Duration
}

// withMemberCmds adds the member commands under `skiff server`.
func withMemberCmds(server *cobra.Command, r *Root) *cobra.Command {
	server.AddCommand((&removeMemberCmd{r: r}).command())
	return server
}

func (rc *removeMemberCmd) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove-member NAME",
		Short: "Remove a server's etcd member from the cluster (a server lost for good), through a running server",
		Long: `Remove the etcd member NAME (a server's name: its node name, or
skiff-server-NAME with --no-agent) from a cluster of servers on embedded etcd,
asking the running server of the CLI config. Stop that server first, if it
still runs: a removed member stops serving. Then a new server can take its
place with an empty data directory and --join-server.

etcd refuses a removal until the members left have been connected for a few
seconds (so that they keep a majority); the command asks again meanwhile,
up to --timeout. The server that answers cannot remove its own member: ask
another one (--kubeconfig with its address).

  skiff server remove-member node-3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return rc.Run(cmd.Context(), args[0]) },
	}
	cmd.Flags().DurationVar(&rc.timeout, "timeout", time.Minute, "how long to ask again while etcd cannot remove the member yet")
	return cmd
}

// Run removes the member name.
func (rc *removeMemberCmd) Run(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("remove-member: NAME must not be empty")
	}
	cfg, err := rc.r.ClientConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rc.timeout)
	defer cancel()
	told := false
	err = cluster.RemoveMember(ctx, c, name, func(err error) {
		if !told {
			fmt.Fprintf(rc.r.Stderr, "etcd cannot remove %s yet (%v); asking again every second for up to %v\n", name, err, rc.timeout)
			told = true
		}
	})
	if err != nil {
		return fmt.Errorf("remove etcd member %s: %w", name, err)
	}
	fmt.Fprintf(rc.r.Stdout, "etcd member %s removed. A new server can take its place: an empty --data-dir and --join-server.\n", name)
	return nil
}
