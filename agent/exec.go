package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"skiff.dev/skiff/agent/remotecommand"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/runtime"
)

// serveExec runs a command in a running container over the kubelet's
// streaming protocols (agent/remotecommand), as `kubectl exec` and `kubectl
// cp` (tar over exec) ask.
func (a *Agent) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.ParseOptions(r.URL.Query(), true)
	if err != nil {
		writeStatus(w, api.NewBadRequest(err.Error()))
		return
	}
	pod, name, id, err := a.runningContainer(r, opts.Container)
	if err != nil {
		writeStatus(w, err)
		return
	}
	a.log.Info("exec", "pod", api.KeyOf(pod), "container", name, "command", opts.Command, "tty", opts.TTY)
	remotecommand.ServeExec(w, r, opts, func(ctx context.Context, s remotecommand.Streams) (int, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		return a.rt.Exec(ctx, id, runtime.ExecOptions{
			Cmd:    opts.Command,
			Stdin:  s.Stdin,
			Stdout: s.Stdout,
			Stderr: s.Stderr,
			TTY:    s.TTY,
			Resize: runtimeSizes(ctx, s.Resize),
		})
	})
}

// serveAttach streams a running container's output from now on, as
// `kubectl attach` asks. skiff starts containers with their output going
// to the log file and no stdin, so attach cannot give the container input:
// it says so on the connection when the client asks for stdin.
func (a *Agent) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.ParseOptions(r.URL.Query(), false)
	if err != nil {
		writeStatus(w, api.NewBadRequest(err.Error()))
		return
	}
	pod, name, id, err := a.runningContainer(r, opts.Container)
	if err != nil {
		writeStatus(w, err)
		return
	}
	a.log.Info("attach", "pod", api.KeyOf(pod), "container", name, "stdin", opts.Stdin, "tty", opts.TTY)
	remotecommand.ServeAttach(w, r, opts, func(ctx context.Context, s remotecommand.Streams) error {
		out := s.Stdout
		if out == nil {
			out = io.Discard
		}
		if s.Stdin != nil {
			note := s.Stderr
			if note == nil {
				note = out
			}
			fmt.Fprintf(note, "skiff: stdin of container %s is not available through attach (skiff runs containers without an open stdin); showing its output only\r\n", name)
		}
		// Output from now on: the last 0 lines, then what follows.
		return a.rt.Logs(ctx, id, runtime.LogOptions{Follow: true, Tail: 0}, out)
	})
}

// runningContainer finds the request's pod and container and the runtime
// id of the container's running attempt.
func (a *Agent) runningContainer(r *http.Request, container string) (*api.Pod, string, string, error) {
	pod, name, err := a.podContainer(r, container)
	if err != nil {
		return nil, "", "", err
	}
	cs, err := a.containerAttempts(r.Context(), pod, name)
	if err != nil {
		return nil, "", "", err
	}
	if len(cs) == 0 || cs[0].State != runtime.StateRunning {
		return nil, "", "", api.NewBadRequest(fmt.Sprintf("unable to upgrade connection: container %s not found in pod %s or not running", name, pod.Name))
	}
	return pod, name, cs[0].ID, nil
}

// runtimeSizes passes terminal sizes on to the runtime until in closes or
// ctx ends (nil in: nil out).
func runtimeSizes(ctx context.Context, in <-chan remotecommand.TerminalSize) <-chan runtime.TerminalSize {
	if in == nil {
		return nil
	}
	out := make(chan runtime.TerminalSize)
	go func() {
		defer close(out)
		for {
			select {
			case s, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- runtime.TerminalSize{Width: s.Width, Height: s.Height}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
