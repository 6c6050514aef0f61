package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"skiff.dev/skiff/agent/remotecommand"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// execCmd is `skiff exec`: run a command in a running container, through
// the API server and the agent of the pod's node (agent/remotecommand).
type execCmd struct {
	r         *Root
	container string
	stdin     bool
	tty       bool
}

func newExecCmd(r *Root) *cobra.Command {
	e := &execCmd{r: r}
	cmd := &cobra.Command{
		Use:   "exec [-it] (POD | TYPE/NAME) [-c CONTAINER] -- COMMAND [ARG...]",
		Short: "Run a command in a container",
		Long: `Run a command in a running container of a pod; TYPE/NAME (deployment/web) picks
the first pod of its selector. The command's exit code becomes skiff's. -i
passes standard input, -t gives the command a terminal (raw mode locally).`,
		Example: `  skiff exec web-7c5ddbdf54-x2x8k -- cat /etc/hostname
  skiff exec -it deployment/web -- sh`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			var target string
			var command []string
			switch {
			case dash == 0:
				return errors.New("expected POD or TYPE/NAME before --")
			case dash > 1:
				return fmt.Errorf("exactly one pod before --, got %q", args[:dash])
			default: // dash == 1, or no dash: skiff exec POD CMD... (kubectl's old form)
				target, command = args[0], args[1:]
			}
			return e.Run(cmd.Context(), target, command)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&e.container, "container", "c", "", "container name (default: the first)")
	fl.BoolVarP(&e.stdin, "stdin", "i", false, "pass standard input to the command")
	fl.BoolVarP(&e.tty, "tty", "t", false, "give the command a terminal")
	return cmd
}

// Run runs command in the container and returns its exit code as an *ExitError.
func (e *execCmd) Run(ctx context.Context, target string, command []string) error {
	if len(command) == 0 {
		return errors.New("you must specify at least one command for the container")
	}
	c, err := e.r.Client()
	if err != nil {
		return err
	}
	pod, err := resolvePod(ctx, c, e.r.Namespace, target)
	if err != nil {
		return err
	}
	name := e.container
	if name == "" {
		name = defaultContainer(pod, e.r.Stderr)
	}
	// The upgrade needs the server and token themselves, not only an Interface.
	cfg, err := client.LoadConfig(client.ResolveConfigPath(e.r.ConfigPath))
	if err != nil {
		return err
	}

	tty := e.tty
	var stdin io.Reader
	if e.stdin {
		stdin = e.r.Stdin
	}
	if tty {
		f, ok := e.r.Stdin.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			fmt.Fprintln(e.r.Stderr, "Unable to use a TTY - input is not a terminal or the right kind of file")
			tty = false
		} else if e.stdin {
			old, err := term.MakeRaw(int(f.Fd()))
			if err != nil {
				return fmt.Errorf("put the terminal in raw mode: %w", err)
			}
			defer term.Restore(int(f.Fd()), old)
		}
	}
	path := client.PathFor(api.MustKindOf(&api.Pod{}), pod.Namespace, pod.Name, "exec")
	conn, err := remotecommand.Dial(ctx, nil, cfg.Server, cfg.Token, path,
		remotecommand.Options{Command: command, Container: name, Stdin: stdin != nil, TTY: tty})
	if err != nil {
		return err
	}
	code, err := remotecommand.Stream(ctx, conn, stdin, e.r.Stdout, e.r.Stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		fmt.Fprintf(e.r.Stderr, "command terminated with exit code %d\n", code)
		return &ExitError{Code: code}
	}
	return nil
}
