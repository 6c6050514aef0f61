package cli

import "github.com/spf13/cobra"

// serverCommands returns the commands that run cluster components: up,
// server and version (cluster.go).
func (r *Root) serverCommands() []*cobra.Command {
	return []*cobra.Command{newUpCmd(r), newServerCmd(r), newVersionCmd(r)}
}
