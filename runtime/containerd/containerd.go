// Package containerd is the Runtime that runs real containers: it drives
// containerd through its v2 Go client, with runc through the v2 shim.
//
// # Mapping
//
//   - a skiff container is a containerd container (metadata + an overlayfs
//     snapshot of its image) plus, once started, a task (the runc process);
//   - everything skiff must know again after an agent restart is a container
//     label: the agent's own labels, and this package's (log path, start
//     time, OOM kill, CDI edits) under the "skiff.dev/runtime." prefix,
//     which ContainerStatus hides;
//   - stdout and stderr go to one log file per container, written by the
//     shim itself (cio.LogFile), so output is kept while the agent is down;
//   - CDI devices are resolved with tags.cncf.io/container-device-interface
//     and applied to the OCI spec before the container is created: what the
//     NVIDIA Container Toolkit does for Docker.
//
// # Restarts
//
// Containers survive an agent restart (the shim owns them) and a containerd
// restart (containerd reconnects to running shims). The gRPC connection
// redials on its own; calls made while containerd is down fail with
// runtime.ErrUnavailable. WaitContainer waits again after such an error,
// and Events sends runtime.EventResync after it has resubscribed. A start
// that containerd's death cut short leaves a task half-made (its shim has
// none) or created but never started; the next StartContainer deletes
// either and starts the container anew.
//
// # OOM kills
//
// A process killed for going over its memory limit exits with SIGKILL (137).
// Two sources say whether the kernel did it: the /tasks/oom event, recorded
// as a label by a watcher goroutine, and the container's memory cgroup
// (oom_kill in memory.events or memory.oom_control), read when a container
// that exited with 137 is looked at, which covers an event missed while the
// agent was down.
package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"skiff.dev/skiff/client/backoff"
	"skiff.dev/skiff/runtime"
)

var _ runtime.Runtime = (*Runtime)(nil)

// Labels this package keeps on containers.
const (
	labelPrefix    = "skiff.dev/runtime."
	labelLogPath   = labelPrefix + "log-path"
	labelStartedAt = labelPrefix + "started-at"
	labelOOMKilled = labelPrefix + "oom-killed"
	labelCDIEdits  = labelPrefix + "cdi-edits"
)

// ReasonUnknown is the reason of a container whose task vanished (the
// machine rebooted, or the shim was killed): its exit code is lost.
const ReasonUnknown = "ContainerStatusUnknown"

// Runtime is the containerd runtime. Create it with New.
type Runtime struct {
	cfg    Config
	log    *slog.Logger
	client *containerd.Client
	cdi    *cdi.Cache

	// bg lives as long as the runtime: its goroutines run under it.
	bg        context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New connects to containerd and starts watching for OOM kills. It fails
// with runtime.ErrUnavailable when containerd does not answer within
// cfg.DialTimeout.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("containerd runtime config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "runtime", "containerd", cfg.Address, "namespace", cfg.Namespace)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("containerd runtime state dir: %w", err)
	}
	client, err := containerd.New(cfg.Address,
		containerd.WithDefaultNamespace(cfg.Namespace),
		containerd.WithDefaultRuntime(cfg.RuntimeName),
		containerd.WithTimeout(cfg.DialTimeout))
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w: %w", cfg.Address, runtime.ErrUnavailable, err)
	}
	vctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := client.Version(vctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("connect to containerd at %s: %w: %w", cfg.Address, runtime.ErrUnavailable, err)
	}
	cache, _ := cdi.NewCache(cdi.WithSpecDirs(cfg.CDISpecDirs...), cdi.WithAutoRefresh(false))
	bg, stop := context.WithCancel(namespaces.WithNamespace(context.Background(), cfg.Namespace))
	r := &Runtime{cfg: cfg, log: log, client: client, cdi: cache, bg: bg, cancel: stop}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.watchOOM(bg)
	}()
	return r, nil
}

// Close stops the OOM watcher and Events streams and closes the connection.
func (r *Runtime) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		err = r.client.Close()
	})
	return err
}

// Client is the underlying containerd client, for tools and tests.
func (r *Runtime) Client() *containerd.Client { return r.client }

func (r *Runtime) ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// mapErr turns containerd's errors into runtime's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
	case errdefs.IsAlreadyExists(err):
		return fmt.Errorf("%w: %w", runtime.ErrAlreadyExists, err)
	case errdefs.IsUnavailable(err):
		return fmt.Errorf("%w: %w", runtime.ErrUnavailable, err)
	}
	return err
}

// Version implements runtime.Runtime.
func (r *Runtime) Version(ctx context.Context) (runtime.VersionInfo, error) {
	v, err := r.client.Version(r.ns(ctx))
	if err != nil {
		return runtime.VersionInfo{}, fmt.Errorf("containerd version: %w", mapErr(err))
	}
	return runtime.VersionInfo{Name: "containerd", Version: v.Version}, nil
}

// StartContainer implements runtime.Runtime.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, mapErr(err))
	}
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, mapErr(err))
	}
	if t, err := c.Task(ctx, nil); err == nil {
		st, err := t.Status(ctx)
		if err != nil {
			return fmt.Errorf("start container %s: %w", id, mapErr(err))
		}
		if st.Status != containerd.Created {
			return fmt.Errorf("start container %s: already started: %w", id, runtime.ErrInvalidState)
		}
		// A task created but never started: containerd, or the agent, was
		// killed between the task's create and its start (the soak's kill
		// -9 of containerd mid-start), and its create may have lost its IO.
		// Delete it and create it anew, as below for a half-made one.
		r.log.Warn("deleting a task created but never started", "id", id)
		if _, err := t.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("start container %s: delete the task created but never started: %w", id, mapErr(err))
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("start container %s: %w", id, mapErr(err))
	}
	logPath := info.Labels[labelLogPath]
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("start container %s: log dir: %w", id, err)
	}
	task, err := c.NewTask(ctx, cio.LogFile(logPath))
	if errdefs.IsAlreadyExists(err) {
		// containerd killed between starting a task's shim and creating the
		// task in it finds the shim again when it restarts and lists the
		// task, which the shim does not have: Task says not found (above),
		// NewTask already exists, for ever. Deleting the task stops that
		// shim and removes its bundle (the shim's own "not found" for the
		// missing task comes back and is expected); then create it anew.
		r.log.Warn("deleting a task left half-made by a containerd restart", "id", id, "err", err)
		if err := r.deleteHalfMadeTask(ctx, id); err != nil {
			return fmt.Errorf("start container %s: delete the half-made task: %w", id, err)
		}
		task, err = c.NewTask(ctx, cio.LogFile(logPath))
	}
	if err != nil {
		return fmt.Errorf("start container %s: create task: %w", id, mapErr(err))
	}
	if err := task.Start(ctx); err != nil {
		if _, derr := task.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill); derr != nil {
			r.log.Warn("delete task that failed to start", "id", id, "err", derr)
		}
		return fmt.Errorf("start container %s: %w", id, mapErr(err))
	}
	if _, err := c.SetLabels(ctx, map[string]string{labelStartedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
		r.log.Warn("record start time", "id", id, "err", err)
	}
	return nil
}

// StopContainer implements runtime.Runtime.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, mapErr(err))
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil // never started
	}
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, mapErr(err))
	}
	st, err := task.Status(ctx)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, mapErr(err))
	}
	if st.Status == containerd.Stopped {
		return nil
	}
	// Wait before signalling, or the exit could come before the wait.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited, err := task.Wait(wctx)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, mapErr(err))
	}
	if err := task.Kill(ctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %s: SIGTERM: %w", id, mapErr(err))
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	case <-timer.C:
	}
	if err := task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %s: SIGKILL: %w", id, mapErr(err))
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	}
}

// RemoveContainer implements runtime.Runtime.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			// An interrupted create may have left its snapshot.
			if serr := r.removeOrphanSnapshot(ctx, id); serr != nil {
				r.log.Warn("remove container: orphan snapshot", "id", id, "err", serr)
			}
		}
		return fmt.Errorf("remove container %s: %w", id, mapErr(err))
	}
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return fmt.Errorf("remove container %s: %w", id, mapErr(err))
	}
	task, err := c.Task(ctx, nil)
	switch {
	case err == nil:
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove container %s: delete task: %w", id, mapErr(err))
		}
	case errdefs.IsNotFound(err):
		// A half-made task (see StartContainer) is listed without being
		// found: delete it too, or its shim outlives the container.
		if err := r.deleteHalfMadeTask(ctx, id); err != nil {
			return fmt.Errorf("remove container %s: delete the half-made task: %w", id, err)
		}
	default:
		return fmt.Errorf("remove container %s: %w", id, mapErr(err))
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, mapErr(err))
	}
	if p := info.Labels[labelLogPath]; p != "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("remove log file", "id", id, "path", p, "err", err)
		}
	}
	return nil
}

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	ctx = r.ns(ctx)
	rec, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return runtime.ContainerStatus{}, fmt.Errorf("container status %s: %w", id, mapErr(err))
	}
	resp, err := r.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: id})
	var proc *tasktypes.Process
	switch {
	case err == nil:
		proc = resp.Process
	case !errdefs.IsNotFound(errgrpc.ToNative(err)):
		return runtime.ContainerStatus{}, fmt.Errorf("container status %s: %w", id, mapErr(errgrpc.ToNative(err)))
	}
	return r.status(rec, proc), nil
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
	ctx = r.ns(ctx)
	var filters []string
	if len(labels) > 0 {
		parts := make([]string, 0, len(labels))
		for k, v := range labels {
			parts = append(parts, "labels."+strconv.Quote(k)+"=="+strconv.Quote(v))
		}
		filters = []string{strings.Join(parts, ",")}
	}
	recs, err := r.client.ContainerService().List(ctx, filters...)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", mapErr(err))
	}
	procs, err := r.tasksOf(ctx, recs)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.ContainerStatus, 0, len(recs))
	for _, rec := range recs {
		out = append(out, r.status(rec, procs[rec.ID]))
	}
	return out, nil
}

// maxTaskGets is how many containers' tasks ListContainers asks for one by
// one; for more it lists the namespace's tasks.
const maxTaskGets = 8

// tasksOf returns the main process of the task of each container in recs,
// by container ID; a container without a task has none. The task service's
// List asks every shim of the namespace for its state, one call each, so
// its cost grows with the node's running containers; a pod's few
// containers (a label filter's usual answer) are asked for one by one
// instead. A Get answered with anything but not found falls back to the
// List, whose answer (it leaves out tasks whose shim cannot say their
// state) stays the reference.
func (r *Runtime) tasksOf(ctx context.Context, recs []containers.Container) (map[string]*tasktypes.Process, error) {
	procs := make(map[string]*tasktypes.Process, len(recs))
	if len(recs) <= maxTaskGets {
		each := true
		for _, rec := range recs {
			resp, err := r.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: rec.ID})
			if err == nil && resp.Process != nil {
				procs[rec.ID] = resp.Process
				continue
			}
			if err != nil && errdefs.IsNotFound(errgrpc.ToNative(err)) {
				continue
			}
			each = false
			break
		}
		if each {
			return procs, nil
		}
		clear(procs)
	}
	resp, err := r.client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", mapErr(errgrpc.ToNative(err)))
	}
	for _, p := range resp.Tasks {
		// containerd 1.x leaves ContainerID empty here; a task's ID is its
		// container's.
		id := p.ContainerID
		if id == "" {
			id = p.ID
		}
		procs[id] = p
	}
	return procs, nil
}

// status builds a ContainerStatus from the container record and its task's
// main process (nil when there is no task).
func (r *Runtime) status(rec containers.Container, proc *tasktypes.Process) runtime.ContainerStatus {
	s := runtime.ContainerStatus{
		ID:        rec.ID,
		Image:     rec.Image,
		Labels:    map[string]string{},
		CreatedAt: rec.CreatedAt,
		LogPath:   rec.Labels[labelLogPath],
	}
	for k, v := range rec.Labels {
		if !strings.HasPrefix(k, labelPrefix) {
			s.Labels[k] = v
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, rec.Labels[labelStartedAt]); err == nil {
		s.StartedAt = t
	}
	if raw := rec.Labels[labelCDIEdits]; raw != "" {
		var e runtime.CDIEdits
		if err := json.Unmarshal([]byte(raw), &e); err == nil {
			s.CDIEdits = &e
		}
	}
	switch {
	case proc == nil && s.StartedAt.IsZero():
		s.State = runtime.StateCreated
	case proc == nil:
		// Started once, but the task is gone: the machine rebooted or the
		// shim died. The exit code is lost, as in Kubernetes' case.
		s.State = runtime.StateExited
		s.ExitCode = 137
		s.Reason = ReasonUnknown
	case proc.Status == tasktypes.Status_CREATED:
		s.State = runtime.StateCreated
	case proc.Status == tasktypes.Status_STOPPED:
		s.State = runtime.StateExited
		s.ExitCode = int(proc.ExitStatus)
		if proc.ExitedAt != nil {
			s.FinishedAt = proc.ExitedAt.AsTime()
		}
		oom := rec.Labels[labelOOMKilled] == "true" || (s.ExitCode == 137 && r.cgroupOOMKilled(rec.ID))
		s.Reason = runtime.ExitReason(s.ExitCode, oom)
	case proc.Status == tasktypes.Status_UNKNOWN:
		s.State = runtime.StateUnknown
	default: // running, paused, pausing
		s.State = runtime.StateRunning
		s.Pid = proc.Pid
	}
	return s
}

// deleteHalfMadeTask deletes container id's task through the task
// service itself: a task half-made by a containerd restart (see
// StartContainer) is listed but not found, so the client's Task cannot
// reach it. The shim's own "not found" for the task it lacks is expected.
func (r *Runtime) deleteHalfMadeTask(ctx context.Context, id string) error {
	if _, err := r.client.TaskService().Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: id}); err != nil {
		if err = errgrpc.ToNative(err); !errdefs.IsNotFound(err) {
			return mapErr(err)
		}
	}
	return nil
}

// cgroupOOMKilled reads the oom_kill counter of the container's memory
// cgroup, at the path containerd's default spec gives it (/NAMESPACE/ID),
// under cgroup v2 or v1. The cgroup exists until the task is deleted.
func (r *Runtime) cgroupOOMKilled(id string) bool {
	rel := filepath.Join(r.cfg.Namespace, id)
	for _, f := range []string{
		filepath.Join("/sys/fs/cgroup", rel, "memory.events"),
		filepath.Join("/sys/fs/cgroup/memory", rel, "memory.oom_control"),
	} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
				return strings.TrimSpace(n) != "0"
			}
		}
	}
	return false
}

// WaitContainer implements runtime.Runtime.
func (r *Runtime) WaitContainer(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	ctx = r.ns(ctx)
	// containerd restarts in about a second: 100ms doubling to 2s.
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second}}
	for {
		st, err := r.ContainerStatus(ctx, id)
		switch {
		case errors.Is(err, runtime.ErrUnavailable):
			// containerd is restarting: wait for it below.
		case err != nil:
			return runtime.ContainerStatus{}, fmt.Errorf("wait container: %w", err)
		case st.State == runtime.StateExited:
			return st, nil
		case st.State == runtime.StateCreated:
			return runtime.ContainerStatus{}, fmt.Errorf("wait container %s: not started: %w", id, runtime.ErrInvalidState)
		default:
			if exited := r.waitTask(ctx, id); exited {
				b.Reset()
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return runtime.ContainerStatus{}, err
		}
		d := b.Next()
		r.log.Debug("wait container: retrying", "id", id, "err", err, "after", d)
		if !b.Sleep(ctx, d) {
			return runtime.ContainerStatus{}, ctx.Err()
		}
	}
}

// waitTask blocks on the task's exit; false means the wait broke (containerd
// went away, ctx ended) and should be retried.
func (r *Runtime) waitTask(ctx context.Context, id string) bool {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return false
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return errdefs.IsNotFound(err) // gone: look again
	}
	ch, err := task.Wait(ctx)
	if err != nil {
		return false
	}
	select {
	case st := <-ch:
		return st.Error() == nil
	case <-ctx.Done():
		return false
	}
}

// Events implements runtime.Runtime.
func (r *Runtime) Events(ctx context.Context) <-chan runtime.Event {
	out := make(chan runtime.Event, 256)
	ctx, cancel := context.WithCancel(r.ns(ctx))
	// Close ends the stream too.
	stop := context.AfterFunc(r.bg, cancel)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		lost := false
		send := func(ev runtime.Event) {
			if lost {
				select {
				case out <- runtime.Event{Type: runtime.EventResync, Time: time.Now()}:
					lost = false
				default:
					return
				}
			}
			select {
			case out <- ev:
			default:
				lost = true
			}
		}
		r.subscribe(ctx, []string{
			`topic=="/tasks/start"`, `topic=="/tasks/exit"`, `topic=="/tasks/oom"`,
		}, func(env *events.Envelope) {
			if ev, ok := r.translate(ctx, env); ok {
				send(ev)
			}
		}, func() { send(runtime.Event{Type: runtime.EventResync, Time: time.Now()}) })
	}()
	return out
}

func (r *Runtime) translate(ctx context.Context, env *events.Envelope) (runtime.Event, bool) {
	v, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		return runtime.Event{}, false
	}
	ev := runtime.Event{Time: env.Timestamp}
	switch e := v.(type) {
	case *eventtypes.TaskStart:
		ev.Type, ev.ID = runtime.EventStarted, e.ContainerID
	case *eventtypes.TaskExit:
		if e.ID != e.ContainerID {
			return runtime.Event{}, false // an exec'd process, not the container
		}
		ev.Type, ev.ID, ev.ExitCode = runtime.EventExited, e.ContainerID, int(e.ExitStatus)
		ev.Reason = runtime.ExitReason(ev.ExitCode, false)
	case *eventtypes.TaskOOM:
		ev.Type, ev.ID = runtime.EventOOM, e.ContainerID
	default:
		return runtime.Event{}, false
	}
	if st, err := r.ContainerStatus(ctx, ev.ID); err == nil {
		ev.Labels = st.Labels
		if ev.Type == runtime.EventExited && st.State == runtime.StateExited {
			ev.Reason = st.Reason
		}
	}
	return ev, true
}

// watchOOM records OOM kills as a container label, so that the reason is
// known even after the task (and its cgroup) is gone.
func (r *Runtime) watchOOM(ctx context.Context) {
	r.subscribe(ctx, []string{`topic=="/tasks/oom"`}, func(env *events.Envelope) {
		v, err := typeurl.UnmarshalAny(env.Event)
		if err != nil {
			return
		}
		e, ok := v.(*eventtypes.TaskOOM)
		if !ok {
			return
		}
		c, err := r.client.LoadContainer(ctx, e.ContainerID)
		if err == nil {
			_, err = c.SetLabels(ctx, map[string]string{labelOOMKilled: "true"})
		}
		if err != nil && !errdefs.IsNotFound(err) {
			r.log.Warn("record OOM kill", "id", e.ContainerID, "err", err)
		}
	}, func() {})
}

// subscribe delivers containerd events of this namespace matching any of
// filters to handle until ctx ends, resubscribing with backoff when the
// stream breaks (containerd restarted) and calling resynced after each
// successful resubscription.
func (r *Runtime) subscribe(ctx context.Context, filters []string, handle func(*events.Envelope), resynced func()) {
	for i := range filters {
		filters[i] = `namespace==` + strconv.Quote(r.cfg.Namespace) + `,` + filters[i]
	}
	// 100ms doubling to 5s: containerd restarts in about a second.
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}}
	for first := true; ; first = false {
		sctx, cancel := context.WithCancel(ctx)
		envs, errs := r.client.Subscribe(sctx, filters...)
		if !first {
			resynced()
		}
		var d time.Duration // before resubscribing
	loop:
		for {
			select {
			case env := <-envs:
				b.Reset()
				handle(env)
			case err := <-errs:
				d = b.Next()
				if ctx.Err() == nil {
					r.log.Info("event stream broke; resubscribing", "err", err, "after", d)
				}
				break loop
			}
		}
		cancel()
		if !b.Sleep(ctx, d) {
			return
		}
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
