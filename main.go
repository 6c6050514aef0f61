// Command skiff is a whole small GPU cluster in one binary: control plane,
// node agent and a kubectl-style CLI. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"skiff.dev/skiff/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}
