package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	kremotecommand "k8s.io/client-go/tools/remotecommand"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// execCmd is `skiff exec`: run a command in a running container, through
// the API server and the agent of the pod's node, over the protocols
// kubectl uses (client-go's tools/remotecommand; agent/remotecommand).
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
	code, err := e.r.stream(ctx, pod, "exec", kubectl.ExecOptions{Command: command, Container: name}, e.stdin, e.tty)
	if err != nil {
		return err
	}
	if code != 0 {
		fmt.Fprintf(e.r.Stderr, "command terminated with exit code %d\n", code)
		return &ExitError{Code: code}
	}
	return nil
}

// stream runs an exec or attach (sub) of pod with client-go's executor, the
// one kubectl uses: WebSocket v5, SPDY when the upgrade is refused
// (agent/remotecommand). It returns the command's exit code.
func (r *Root) stream(ctx context.Context, pod *api.Pod, sub string, o kubectl.ExecOptions, stdin, tty bool) (int, error) {
	cfg, err := r.ClientConfig()
	if err != nil {
		return 0, err
	}
	o.Stdin, o.Stdout, o.Stderr = stdin, true, true
	so := kremotecommand.StreamOptions{Stdout: r.Stdout, Stderr: r.Stderr}
	if stdin {
		so.Stdin = r.Stdin
	}
	if tty {
		f, ok := r.Stdin.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			fmt.Fprintln(r.Stderr, "Unable to use a TTY - input is not a terminal or the right kind of file")
		} else {
			o.TTY, o.Stderr, so.Tty, so.Stderr = true, false, true, nil
			if stdin {
				old, err := term.MakeRaw(int(f.Fd()))
				if err != nil {
					return 0, fmt.Errorf("put the terminal in raw mode: %w", err)
				}
				defer term.Restore(int(f.Fd()), old)
			}
			q := newSizeQueue(ctx, int(f.Fd()))
			defer q.stop()
			so.TerminalSizeQueue = q
		}
	}
	rc := kubectl.RESTConfig(cfg)
	u, err := kubectl.URL(rc, client.PathFor(api.MustKindOf(&api.Pod{}), pod.Namespace, pod.Name, sub), o.Query())
	if err != nil {
		return 0, err
	}
	ex, err := kubectl.NewExecutor(rc, u)
	if err != nil {
		return 0, err
	}
	err = ex.StreamWithContext(ctx, so)
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", sub, err)
	}
	return 0, nil
}

// sizeQueue sends the terminal's size, then each change (SIGWINCH).
type sizeQueue struct {
	fd      int
	winch   chan os.Signal
	done    chan struct{}
	stopped sync.Once
	first   bool
}

func newSizeQueue(ctx context.Context, fd int) *sizeQueue {
	q := &sizeQueue{fd: fd, winch: make(chan os.Signal, 1), done: make(chan struct{}), first: true}
	signal.Notify(q.winch, syscall.SIGWINCH)
	context.AfterFunc(ctx, q.stop)
	return q
}

// Next implements kremotecommand.TerminalSizeQueue; nil ends it.
func (q *sizeQueue) Next() *kremotecommand.TerminalSize {
	if !q.first {
		select {
		case <-q.winch:
		case <-q.done:
			return nil
		}
	}
	q.first = false
	w, h, err := term.GetSize(q.fd)
	if err != nil {
		return nil
	}
	return &kremotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
}

func (q *sizeQueue) stop() {
	q.stopped.Do(func() {
		signal.Stop(q.winch)
		close(q.done)
	})
}
