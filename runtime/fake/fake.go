// Package fake is a Runtime that simulates containers in memory: no
// processes, no filesystems, no cgroups. `skiff up` uses it on a machine
// without containerd ("simulated, no processes"), unit tests use it in place
// of containerd, and scale tests run thousands of simulated nodes with it.
//
// # What is simulated
//
// A started container "runs" its command through a tiny interpreter that
// knows just enough to make course examples behave:
//
//   - `sh -c SCRIPT` runs the statements of SCRIPT, split at ; && || and
//     newlines: `echo WORDS` writes a log line, `exit N` ends the container
//     with code N, `sleep ...` sleeps forever (until stopped), `true` and
//     `false` set the status. A script that ends without sleeping exits 0
//     (or with the status of its last statement).
//   - a bare `echo`, `true`, `false` or `exit N` behaves the same way;
//   - anything else (nginx, httpd, python server.py, ...) runs until stopped.
//
// Stop ends a container with code 143 (SIGTERM); tests end containers with
// any code and reason through Exit (Exit(id, 137, runtime.ReasonOOMKilled)).
// Exec understands echo, env, pwd, cat (stdin to stdout), true, false and
// sh -c with echo/exit; other commands succeed silently. Config.ExecHook
// replaces this.
//
// Images: those in Config.Images are present; a pull succeeds when
// Config.PullableAll is set or the image is in Config.Pullable, except for
// references whose registry ends in ".invalid" or that contain
// "does-not-exist", which fail as a registry's "not found" does, so the
// ErrImagePull lab works in simulation. ImportImage reads real OCI and
// docker archives (names and image config, not layers).
//
// # Cost
//
// A container is a struct in a map; no goroutine or timer exists per
// container. Waiters and followers share one channel per container that is
// closed on every change.
package fake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/runtime"
)

var _ runtime.Runtime = (*Runtime)(nil)

// Config sets up a fake Runtime.
type Config struct {
	// Images present from the start; short names are normalised.
	Images []string
	// Pullable images are added by a pull; PullableAll makes every image
	// pullable except the ones meant to fail (see the package doc).
	Pullable    []string
	PullableAll bool
	// ExecHook, when set, runs every Exec instead of the built-in
	// interpreter and returns its exit code.
	ExecHook func(id string, opts runtime.ExecOptions) (int, error)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultConfig is the fake `skiff up` uses: every image pullable, because a
// simulated node has nothing to download and labs name real images.
func DefaultConfig() Config {
	return Config{PullableAll: true}
}

// Runtime is the simulated runtime. Create it with New.
type Runtime struct {
	cfg Config

	mu         sync.Mutex
	images     map[string]runtime.ImageInfo
	pullable   map[string]bool
	containers map[string]*container
	subs       map[*subscriber]struct{}
	closed     bool
}

type container struct {
	spec   runtime.ContainerSpec
	status runtime.ContainerStatus
	log    bytes.Buffer
	// changed is closed and replaced on every change of status or log.
	changed chan struct{}
	// stats are the figures ContainerStats reports (stats.go).
	stats runtime.ContainerStats
}

type subscriber struct {
	ch   chan runtime.Event
	lost bool
}

// New returns a fake runtime.
func New(cfg Config) *Runtime {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Runtime{
		cfg:        cfg,
		images:     map[string]runtime.ImageInfo{},
		pullable:   map[string]bool{},
		containers: map[string]*container{},
		subs:       map[*subscriber]struct{}{},
	}
	for _, ref := range cfg.Images {
		if name, err := runtime.NormalizeImageRef(ref); err == nil {
			r.images[name] = fakeImage(name)
		}
	}
	for _, ref := range cfg.Pullable {
		if name, err := runtime.NormalizeImageRef(ref); err == nil {
			r.pullable[name] = true
		}
	}
	return r
}

func fakeImage(name string) runtime.ImageInfo {
	return runtime.ImageInfo{Name: name, Digest: "sha256:" + hex.EncodeToString([]byte(name))[:16], Size: 1 << 20}
}

// meantToFail reports references the fake refuses to pull.
func meantToFail(name string) bool {
	host, _, _ := strings.Cut(name, "/")
	return strings.HasSuffix(host, ".invalid") || strings.Contains(name, "does-not-exist")
}

// EnsureImage implements runtime.Runtime.
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, progress func(runtime.PullProgress)) (runtime.ImageInfo, error) {
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return runtime.ImageInfo{}, &runtime.PullError{Ref: ref, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return runtime.ImageInfo{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img, present := r.images[name]
	switch {
	case policy == runtime.PullNever && !present:
		return runtime.ImageInfo{}, fmt.Errorf("image %q (pull policy Never): %w", name, runtime.ErrImageNotFound)
	case present && policy != runtime.PullAlways:
		return img, nil
	}
	if meantToFail(name) || !(r.cfg.PullableAll || r.pullable[name] || present) {
		return runtime.ImageInfo{}, &runtime.PullError{Ref: name, NotFound: true,
			Err: fmt.Errorf("%s: not found (simulated registry)", name)}
	}
	if !present {
		img = fakeImage(name)
		r.images[name] = img
	}
	if progress != nil {
		progress(runtime.PullProgress{Ref: name, DoneBytes: img.Size, TotalBytes: img.Size, Done: true})
	}
	return img, nil
}

// ImportImage implements runtime.Runtime.
func (r *Runtime) ImportImage(ctx context.Context, rd io.Reader) ([]string, error) {
	imgs, err := readArchive(rd)
	if err != nil {
		return nil, fmt.Errorf("import image: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, img := range imgs {
		r.images[img.Name] = img
		names = append(names, img.Name)
	}
	return names, nil
}

// ListImages implements runtime.Runtime.
func (r *Runtime) ListImages(ctx context.Context) ([]runtime.ImageInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.images))
	slices.SortFunc(out, func(a, b runtime.ImageInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateContainer implements runtime.Runtime.
func (r *Runtime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) (string, error) {
	name, err := runtime.NormalizeImageRef(spec.Image)
	if err != nil {
		return "", fmt.Errorf("create container: %w: %w", runtime.ErrInvalidSpec, err)
	}
	if spec.ID == "" {
		spec.ID = newID()
	}
	if err := runtime.ValidateID(spec.ID); err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img, ok := r.images[name]
	if !ok {
		return "", fmt.Errorf("create container %s: image %q: %w", spec.ID, name, runtime.ErrImageNotFound)
	}
	if _, ok := r.containers[spec.ID]; ok {
		return "", fmt.Errorf("create container %s: %w", spec.ID, runtime.ErrAlreadyExists)
	}
	var edits *runtime.CDIEdits
	if len(spec.CDIDevices) > 0 {
		// Simulated devices: every name resolves, and the edit is the
		// environment variable NVIDIA's toolkit would set.
		edits = &runtime.CDIEdits{Devices: slices.Clone(spec.CDIDevices)}
		for _, d := range spec.CDIDevices {
			vendorClass, dev, ok := strings.Cut(d, "=")
			if !ok || !strings.Contains(vendorClass, "/") {
				return "", fmt.Errorf("create container %s: %q: %w", spec.ID, d, runtime.ErrCDIUnresolved)
			}
			edits.Env = append(edits.Env, "SKIFF_SIMULATED_DEVICE="+dev)
		}
	}
	sec, err := recordSecurity(spec.Security, img) // security.go
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	spec.Security = sec
	spec.Labels = maps.Clone(spec.Labels)
	spec.Command = runtime.ResolveArgs(img.Entrypoint, img.Cmd, spec.Command, spec.Args)
	spec.Args = nil
	spec.Env = append(slices.Clone(img.Env), spec.Env...)
	if spec.WorkingDir == "" {
		spec.WorkingDir = img.WorkingDir
	}
	if spec.WorkingDir == "" {
		spec.WorkingDir = "/"
	}
	c := &container{
		spec: spec,
		status: runtime.ContainerStatus{
			ID: spec.ID, Image: name, Labels: spec.Labels, State: runtime.StateCreated,
			CreatedAt: r.cfg.Now(), LogPath: spec.LogPath, CDIEdits: edits,
		},
		changed: make(chan struct{}),
	}
	r.containers[spec.ID] = c
	return spec.ID, nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// StartContainer implements runtime.Runtime.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	if c.status.State != runtime.StateCreated {
		return fmt.Errorf("start container %s: is %s: %w", id, c.status.State, runtime.ErrInvalidState)
	}
	now := r.cfg.Now()
	c.status.State = runtime.StateRunning
	c.status.StartedAt = now
	c.status.Pid = uint32(1000 + len(r.containers))
	r.publish(runtime.Event{Type: runtime.EventStarted, ID: id, Labels: c.status.Labels, Time: now})
	r.run(c)
	c.notify()
	return nil
}

// run interprets the container's command up to its end or a sleep.
func (r *Runtime) run(c *container) {
	var out bytes.Buffer
	args := runtime.ResolveArgs(nil, nil, c.spec.Command, c.spec.Args)
	if len(args) == 0 {
		// No command: the image's own entrypoint, a server as far as a
		// simulation can tell (nginx:alpine). It runs until stopped.
		return
	}
	code, done := interpret(args, c.spec.Env, c.spec.WorkingDir, idOutput(c.spec.Security), nil, &out)
	c.log.Write(out.Bytes())
	if done {
		r.exit(c, code, "")
	}
}

// Exit ends a running container with code and reason (empty: derived from
// code), as the kernel or the process would. It is the test hook for crashes
// and OOM kills: Exit(id, 137, runtime.ReasonOOMKilled).
func (r *Runtime) Exit(id string, code int, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return err
	}
	if c.status.State != runtime.StateRunning {
		return fmt.Errorf("exit container %s: %w", id, runtime.ErrNotRunning)
	}
	if reason == runtime.ReasonOOMKilled {
		r.publish(runtime.Event{Type: runtime.EventOOM, ID: id, Labels: c.status.Labels, Time: r.cfg.Now()})
	}
	r.exit(c, code, reason)
	return nil
}

// WriteLog appends a line to a container's log, as if its process wrote it.
func (r *Runtime) WriteLog(id, line string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return err
	}
	c.log.WriteString(line + "\n")
	c.notify()
	return nil
}

func (r *Runtime) exit(c *container, code int, reason string) {
	if reason == "" {
		reason = runtime.ExitReason(code, false)
	}
	now := r.cfg.Now()
	c.status.State = runtime.StateExited
	c.status.ExitCode = code
	c.status.Reason = reason
	c.status.FinishedAt = now
	c.status.Pid = 0
	r.publish(runtime.Event{Type: runtime.EventExited, ID: c.status.ID, Labels: c.status.Labels,
		ExitCode: code, Reason: reason, Time: now})
	c.notify()
}

func (c *container) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// StopContainer implements runtime.Runtime. A simulated process always
// honours SIGTERM, so grace is never waited for.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return fmt.Errorf("stop container: %w", err)
	}
	if c.status.State == runtime.StateRunning {
		r.exit(c, 143, runtime.ReasonError)
	}
	return nil
}

// RemoveContainer implements runtime.Runtime.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return fmt.Errorf("remove container: %w", err)
	}
	if c.status.State == runtime.StateRunning {
		r.exit(c, 137, runtime.ReasonError)
	}
	delete(r.containers, id)
	c.notify()
	return nil
}

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return runtime.ContainerStatus{}, fmt.Errorf("container status: %w", err)
	}
	return c.copyStatus(), nil
}

func (c *container) copyStatus() runtime.ContainerStatus {
	s := c.status
	s.Labels = maps.Clone(s.Labels)
	if s.CDIEdits != nil {
		e := *s.CDIEdits
		s.CDIEdits = &e
	}
	return s
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.ContainerStatus
	for _, c := range r.containers {
		if runtime.MatchLabels(c.status.Labels, labels) {
			out = append(out, c.copyStatus())
		}
	}
	slices.SortFunc(out, func(a, b runtime.ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// WaitContainer implements runtime.Runtime.
func (r *Runtime) WaitContainer(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	for {
		r.mu.Lock()
		c, err := r.get(id)
		if err != nil {
			r.mu.Unlock()
			return runtime.ContainerStatus{}, fmt.Errorf("wait container: %w", err)
		}
		switch c.status.State {
		case runtime.StateExited:
			s := c.copyStatus()
			r.mu.Unlock()
			return s, nil
		case runtime.StateCreated:
			r.mu.Unlock()
			return runtime.ContainerStatus{}, fmt.Errorf("wait container %s: not started: %w", id, runtime.ErrInvalidState)
		}
		changed := c.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return runtime.ContainerStatus{}, ctx.Err()
		}
	}
}

// Events implements runtime.Runtime.
func (r *Runtime) Events(ctx context.Context) <-chan runtime.Event {
	s := &subscriber{ch: make(chan runtime.Event, 256)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		close(s.ch)
		return s.ch
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.subs[s]; ok {
			delete(r.subs, s)
			close(s.ch)
		}
	})
	return s.ch
}

// publish sends ev to every subscriber without blocking; r.mu is held.
func (r *Runtime) publish(ev runtime.Event) {
	for s := range r.subs {
		if s.lost {
			select {
			case s.ch <- runtime.Event{Type: runtime.EventResync, Time: ev.Time}:
				s.lost = false
			default:
				continue
			}
		}
		select {
		case s.ch <- ev:
		default:
			s.lost = true
		}
	}
}

// Exec implements runtime.Runtime.
func (r *Runtime) Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error) {
	r.mu.Lock()
	c, err := r.get(id)
	if err == nil && c.status.State != runtime.StateRunning {
		err = fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
	}
	var env []string
	var wd, idOut string
	if err == nil {
		env, wd, idOut = slices.Clone(c.spec.Env), c.spec.WorkingDir, idOutput(c.spec.Security)
	}
	r.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	if len(opts.Cmd) == 0 {
		return 0, fmt.Errorf("exec in %s: empty command: %w", id, runtime.ErrInvalidSpec)
	}
	if r.cfg.ExecHook != nil {
		return r.cfg.ExecHook(id, opts)
	}
	stdout := opts.Stdout
	if stdout == nil {
		stdout = io.Discard
	}
	code, _ := interpret(opts.Cmd, env, wd, idOut, opts.Stdin, stdout)
	return code, nil
}

// Logs implements runtime.Runtime.
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	r.mu.Lock()
	c, err := r.get(id)
	if err != nil {
		r.mu.Unlock()
		return fmt.Errorf("logs: %w", err)
	}
	data := slices.Clone(c.log.Bytes())
	r.mu.Unlock()
	if _, err := w.Write(runtime.TailLines(data, opts.Tail)); err != nil {
		return err
	}
	written := len(data)
	for opts.Follow {
		r.mu.Lock()
		c, err := r.get(id)
		if err != nil { // removed: its log is gone
			r.mu.Unlock()
			return nil
		}
		data := slices.Clone(c.log.Bytes()[written:])
		written += len(data)
		exited := c.status.State == runtime.StateExited
		changed := c.changed
		r.mu.Unlock()
		if _, err := w.Write(data); err != nil {
			return err
		}
		if exited {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// Version implements runtime.Runtime.
func (r *Runtime) Version(ctx context.Context) (runtime.VersionInfo, error) {
	return runtime.VersionInfo{Name: "fake", Version: "simulated, no processes"}, nil
}

// Close implements runtime.Runtime: it ends every Events stream.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for s := range r.subs {
		delete(r.subs, s)
		close(s.ch)
	}
	return nil
}

func (r *Runtime) get(id string) (*container, error) {
	c, ok := r.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotFound)
	}
	return c, nil
}

// interpret runs args in the simulated shell and returns the exit code and
// whether the process ended (false: it sleeps until stopped).
func interpret(args, env []string, wd, id string, stdin io.Reader, out io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, true
	}
	name := args[0][strings.LastIndexByte(args[0], '/')+1:]
	if (name == "sh" || name == "bash" || name == "ash") && len(args) >= 3 && args[1] == "-c" {
		for _, stmt := range splitScript(args[2]) {
			c, d, exit := statement(strings.Fields(stmt), env, wd, id, stdin, out)
			code = c
			if !d {
				return code, false
			}
			if exit {
				return code, true
			}
		}
		return code, true
	}
	switch name {
	case "echo", "true", "false", "exit", "env", "pwd", "cat", "sleep", "id":
		c, d, _ := statement(append([]string{name}, args[1:]...), env, wd, id, stdin, out)
		return c, d
	}
	return 0, false // a server of some kind: runs until stopped
}

func splitScript(s string) []string {
	s = strings.NewReplacer("&&", ";", "||", ";", "\n", ";").Replace(s)
	return strings.Split(s, ";")
}

// statement runs one simple command; exit reports `exit`.
func statement(f, env []string, wd, id string, stdin io.Reader, out io.Writer) (code int, done, exit bool) {
	if len(f) == 0 {
		return 0, true, false
	}
	switch f[0] {
	case "echo":
		words := make([]string, 0, len(f)-1)
		for _, w := range f[1:] {
			words = append(words, strings.Trim(w, `"'`))
		}
		fmt.Fprintln(out, strings.Join(words, " "))
	case "exit":
		if len(f) > 1 {
			code, _ = strconv.Atoi(f[1])
		}
		return code, true, true
	case "false":
		return 1, true, false
	case "sleep":
		return 0, false, false
	case "env":
		for _, e := range env {
			fmt.Fprintln(out, e)
		}
	case "pwd":
		fmt.Fprintln(out, wd)
	case "id":
		fmt.Fprintln(out, id) // security.go
	case "cat":
		if stdin != nil && len(f) == 1 {
			_, _ = io.Copy(out, stdin)
		}
	}
	return 0, true, false
}
