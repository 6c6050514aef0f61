package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"skiff.dev/skiff/internal/outpair"
	"skiff.dev/skiff/runtime"
)

// Exec implements runtime.Runtime. The command runs with the container's
// environment, working directory and user. If ctx ends first, the process is
// killed.
func (r *Runtime) Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error) {
	ctx = r.ns(ctx)
	if len(opts.Cmd) == 0 {
		return 0, fmt.Errorf("exec in %s: empty command: %w", id, runtime.ErrInvalidSpec)
	}
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return 0, fmt.Errorf("exec in %s: %w", id, runtime.ErrNotRunning)
	}
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	pspec := *spec.Process
	pspec.Args = opts.Cmd
	pspec.Terminal = opts.TTY

	// Two FIFO readers copy at once: one writer for both streams (an exec
	// probe's buffer) must take their writes one at a time.
	stdout, stderr := outpair.Pair(opts.Stdout, opts.Stderr)
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var stdin io.Reader
	stdinDone := make(chan struct{})
	if opts.Stdin != nil {
		stdin = &eofReader{r: opts.Stdin, done: stdinDone}
	}
	cioOpts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr)}
	if opts.TTY {
		cioOpts = append(cioOpts, cio.WithTerminal)
	}
	execID := "exec-" + newID()[:12]
	proc, err := task.Exec(ctx, execID, &pspec, cio.NewCreator(cioOpts...))
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	// Clean up with a context of its own: ctx may be what ended.
	cleanup := context.WithoutCancel(ctx)
	defer func() {
		if _, err := proc.Delete(cleanup, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			r.log.Warn("delete exec process", "id", id, "exec", execID, "err", err)
		}
	}()
	exited, err := proc.Wait(cleanup)
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	if err := proc.Start(ctx); err != nil {
		return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
	}
	if opts.TTY && opts.Resize != nil {
		go func() {
			for {
				select {
				case size, ok := <-opts.Resize:
					if !ok {
						return
					}
					if err := proc.Resize(cleanup, uint32(size.Width), uint32(size.Height)); err != nil {
						r.log.Debug("resize exec terminal", "id", id, "exec", execID, "err", err)
					}
				case <-exited:
					return
				}
			}
		}()
	}
	if opts.Stdin != nil {
		go func() {
			// The shim keeps the process's stdin open until told: pass the
			// caller's EOF on.
			select {
			case <-stdinDone:
				_ = proc.CloseIO(cleanup, containerd.WithStdinCloser)
			case <-exited:
			}
		}()
	}
	select {
	case st := <-exited:
		code, _, err := st.Result()
		if err != nil {
			return 0, fmt.Errorf("exec in %s: %w", id, mapErr(err))
		}
		// Wait for the output to be copied before returning.
		proc.IO().Wait()
		return int(code), nil
	case <-ctx.Done():
		_ = proc.Kill(cleanup, syscall.SIGKILL)
		<-exited
		return 0, fmt.Errorf("exec in %s: %w", id, ctx.Err())
	}
}

// eofReader closes done when r is exhausted.
type eofReader struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}

// logPollInterval is how often Logs with Follow looks for new output.
const logPollInterval = 200 * time.Millisecond

// Logs implements runtime.Runtime. It reads the container's log file; with
// Follow it polls the file for growth until the container has exited and
// everything it wrote is out.
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	ctx = r.ns(ctx)
	st, err := r.ContainerStatus(ctx, id)
	if err != nil {
		return fmt.Errorf("logs of %s: %w", id, err)
	}
	data, err := os.ReadFile(st.LogPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logs of %s: %w", id, err)
	}
	if _, err := w.Write(runtime.TailLines(data, opts.Tail)); err != nil {
		return err
	}
	if !opts.Follow {
		return nil
	}
	offset := int64(len(data))
	ticker := time.NewTicker(logPollInterval)
	defer ticker.Stop()
	for {
		// Look at the state before reading, so output written just before
		// the exit is still read.
		st, err := r.ContainerStatus(ctx, id)
		done := err != nil || st.State == runtime.StateExited
		n, err := copyFrom(st.LogPath, offset, w)
		offset += n
		if err != nil {
			return fmt.Errorf("logs of %s: %w", id, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// copyFrom copies path from offset to its end into w.
func copyFrom(path string, offset int64, w io.Writer) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, f)
}
