// Package runtimetest is the one test suite every runtime.Runtime passes:
// runtime/fake always, runtime/containerd against a real containerd.
// A behaviour the agent relies on is tested here once, not per runtime.
//
// The suite imports a busybox image built from the machine's busybox-static
// (internal/testenv), so it needs no registry or network.
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/runtime"
)

// Capabilities say which parts of the suite a runtime can pass.
type Capabilities struct {
	// Processes: commands really run, so exec sees the real environment,
	// mounts and files of the container.
	Processes bool
	// OOM: memory limits are enforced and OOM kills reported.
	OOM bool
	// CDI: CDI devices are resolved against Setup.CDISpecDirs.
	CDI bool
	// Persistent: a second Runtime made by the factory sees the containers
	// of the first (adoption after an agent restart).
	Persistent bool
}

// Setup is what the suite asks of a new Runtime.
type Setup struct {
	CDISpecDirs []string
}

// Factory returns a new Runtime; it registers its own cleanup (Close).
type Factory func(t testing.TB, s Setup) runtime.Runtime

// BusyboxImage is the image the suite runs.
const BusyboxImage = "docker.io/library/busybox:latest"

// Run runs the suite.
func Run(t *testing.T, newRuntime Factory, caps Capabilities) {
	if caps.Processes {
		testenv.RequireBusybox(t)
	}
	rt := newRuntime(t, Setup{})
	s := &suite{rt: rt, run: randomHex(4), caps: caps, newRuntime: newRuntime}
	s.importBusybox(t, rt)

	t.Run("Images", s.testImages)
	t.Run("Errors", s.testErrors)
	t.Run("RunLogsExec", s.testRunLogsExec)
	t.Run("Stop", s.testStop)
	t.Run("ExitCodeAndEvents", s.testExitCodeAndEvents)
	t.Run("EnvWorkdir", s.testEnvWorkdir)
	t.Run("Mounts", s.testMounts)
	t.Run("OOMKilled", s.testOOM)
	t.Run("Adoption", s.testAdoption)
	t.Run("CDI", s.testCDI)
	t.Run("Remove", s.testRemove)
}

// importBusybox imports testenv.Busybox() into rt (a stub of it when the
// runtime runs no processes).
func (s *suite) importBusybox(t testing.TB, rt runtime.Runtime) {
	t.Helper()
	importBusybox(t, rt, !s.caps.Processes)
}

// ImportBusybox imports the busybox test image (BusyboxImage) into rt, so
// that a test needing it sets it up itself instead of relying on the
// suite having run first.
func ImportBusybox(t testing.TB, rt runtime.Runtime) {
	t.Helper()
	importBusybox(t, rt, false)
}

func importBusybox(t testing.TB, rt runtime.Runtime, stub bool) {
	t.Helper()
	img := testenv.Busybox()
	img.Stub = stub
	archive, err := img.Archive()
	if err != nil {
		t.Fatal(err)
	}
	names, err := rt.ImportImage(ctx(t), bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("import busybox: %v", err)
	}
	if !slices.Contains(names, BusyboxImage) {
		t.Fatalf("import busybox: names %v, want %s", names, BusyboxImage)
	}
}

type suite struct {
	rt         runtime.Runtime
	run        string
	caps       Capabilities
	newRuntime Factory
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// create creates (and with start, starts) a busybox container running cmd,
// removed when the test ends.
func (s *suite) create(t *testing.T, rt runtime.Runtime, spec runtime.ContainerSpec, start bool) string {
	t.Helper()
	if spec.Image == "" {
		spec.Image = BusyboxImage
	}
	if spec.ID == "" {
		spec.ID = "rt-" + s.run + "-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + randomHex(2)
	}
	labels := map[string]string{"suite-run": s.run, "test": strings.ReplaceAll(t.Name(), "/", "-")}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	spec.Labels = labels
	id, err := rt.CreateContainer(ctx(t), spec)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.rt.RemoveContainer(context.Background(), id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("cleanup: RemoveContainer %s: %v", id, err)
		}
	})
	if start {
		if err := rt.StartContainer(ctx(t), id); err != nil {
			t.Fatalf("StartContainer: %v", err)
		}
	}
	return id
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *suite) status(t *testing.T, id string) runtime.ContainerStatus {
	t.Helper()
	st, err := s.rt.ContainerStatus(ctx(t), id)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	return st
}

func (s *suite) logs(t *testing.T, id string) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.rt.Logs(ctx(t), id, runtime.LogOptions{Tail: -1}, &b); err != nil {
		t.Fatalf("Logs %s: %v", id, err)
	}
	return b.String()
}

func (s *suite) exec(t *testing.T, id string, opts runtime.ExecOptions) (int, string) {
	t.Helper()
	var out syncBuffer
	opts.Stdout, opts.Stderr = &out, &out
	code, err := s.rt.Exec(ctx(t), id, opts)
	if err != nil {
		t.Fatalf("Exec %v in %s: %v", opts.Cmd, id, err)
	}
	return code, out.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (s *suite) testImages(t *testing.T) {
	imgs, err := s.rt.ListImages(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(imgs, func(i runtime.ImageInfo) bool { return i.Name == BusyboxImage }) {
		t.Errorf("ListImages: no %s in %v", BusyboxImage, imgs)
	}
	for _, ref := range []string{"busybox", "busybox:latest", BusyboxImage} {
		for _, p := range []runtime.PullPolicy{runtime.PullNever, runtime.PullIfNotPresent} {
			img, err := s.rt.EnsureImage(ctx(t), ref, p, nil)
			if err != nil || img.Name != BusyboxImage {
				t.Errorf("EnsureImage(%q, %s) = %q, %v; want %s", ref, p, img.Name, err, BusyboxImage)
			}
			if !slices.Equal(img.Cmd, []string{"sh"}) {
				t.Errorf("EnsureImage(%q): cmd %q, want [sh]", ref, img.Cmd)
			}
		}
	}

	const missing = "does-not-exist.invalid/x:1"
	_, err = s.rt.EnsureImage(ctx(t), missing, runtime.PullNever, nil)
	var pe *runtime.PullError
	if !errors.Is(err, runtime.ErrImageNotFound) || errors.As(err, &pe) {
		t.Errorf("EnsureImage(%s, Never) = %v; want ErrImageNotFound, not a pull error", missing, err)
	}
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.rt.EnsureImage(c, missing, runtime.PullIfNotPresent, nil)
	if !errors.As(err, &pe) {
		t.Errorf("EnsureImage(%s, IfNotPresent) = %v; want a *PullError", missing, err)
	} else if pe.Ref != missing {
		t.Errorf("PullError.Ref = %q, want %q", pe.Ref, missing)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("pull of %s took %v; it should fail fast", missing, d)
	}
}

func (s *suite) testErrors(t *testing.T) {
	c := ctx(t)
	if _, err := s.rt.ContainerStatus(c, "no-such-container"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("ContainerStatus(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.rt.RemoveContainer(c, "no-such-container"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("RemoveContainer(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.rt.StartContainer(c, "no-such-container"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("StartContainer(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.rt.CreateContainer(c, runtime.ContainerSpec{ID: "bad id!", Image: BusyboxImage}); !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Errorf("CreateContainer(bad id) = %v, want ErrInvalidSpec", err)
	}
	if _, err := s.rt.CreateContainer(c, runtime.ContainerSpec{Image: "does-not-exist.invalid/x:1"}); !errors.Is(err, runtime.ErrImageNotFound) {
		t.Errorf("CreateContainer(missing image) = %v, want ErrImageNotFound", err)
	}
	id := s.create(t, s.rt, runtime.ContainerSpec{Command: []string{"sh", "-c", "exit 0"}}, false)
	if _, err := s.rt.CreateContainer(c, runtime.ContainerSpec{ID: id, Image: BusyboxImage}); !errors.Is(err, runtime.ErrAlreadyExists) {
		t.Errorf("CreateContainer(same id) = %v, want ErrAlreadyExists", err)
	}
	if st := s.status(t, id); st.State != runtime.StateCreated {
		t.Errorf("state after create = %s, want created", st.State)
	}
	if _, err := s.rt.WaitContainer(c, id); !errors.Is(err, runtime.ErrInvalidState) {
		t.Errorf("WaitContainer(created) = %v, want ErrInvalidState", err)
	}
	if _, err := s.rt.Exec(c, id, runtime.ExecOptions{Cmd: []string{"true"}}); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("Exec(created) = %v, want ErrNotRunning", err)
	}
}

func (s *suite) testRunLogsExec(t *testing.T) {
	id := s.create(t, s.rt, runtime.ContainerSpec{
		Command: []string{"sh", "-c"},
		Args:    []string{"echo hello; sleep 30"},
	}, true)
	st := s.status(t, id)
	if st.State != runtime.StateRunning || st.StartedAt.IsZero() || st.Labels["suite-run"] != s.run {
		t.Errorf("status after start = %+v; want running, with start time and labels", st)
	}
	eventually(t, 10*time.Second, "log has hello", func() (bool, string) {
		l := s.logs(t, id)
		return strings.Contains(l, "hello\n"), l
	})

	if code, out := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"echo", "hi"}}); code != 0 || out != "hi\n" {
		t.Errorf("exec echo hi = %d, %q; want 0, \"hi\\n\"", code, out)
	}
	if code, _ := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"sh", "-c", "exit 7"}}); code != 7 {
		t.Errorf("exec exit 7 = %d, want 7", code)
	}
	if code, out := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"cat"}, Stdin: strings.NewReader("from stdin\n")}); code != 0 || out != "from stdin\n" {
		t.Errorf("exec cat with stdin = %d, %q; want 0, \"from stdin\\n\"", code, out)
	}
	if s.caps.Processes {
		// One plain bytes.Buffer for both streams, as an exec probe passes:
		// neither stream's output may cut the other's off.
		var both bytes.Buffer
		code, err := s.rt.Exec(ctx(t), id, runtime.ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2"}, Stdout: &both, Stderr: &both})
		if got := both.String(); err != nil || code != 0 || (got != "out\nerr\n" && got != "err\nout\n") {
			t.Errorf("exec with one buffer for stdout and stderr = %d, %q, %v; want both lines", code, got, err)
		}
	}

	// Follow returns when ctx ends, with what was written.
	c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var b syncBuffer
	if err := s.rt.Logs(c, id, runtime.LogOptions{Follow: true, Tail: 1}, &b); err != nil {
		t.Errorf("Logs follow: %v", err)
	}
	if b.String() != "hello\n" {
		t.Errorf("Logs follow tail 1 = %q, want \"hello\\n\"", b.String())
	}
}

func (s *suite) testStop(t *testing.T) {
	// A shell that honours SIGTERM: PID 1 ignores signals it has no handler for.
	id := s.create(t, s.rt, runtime.ContainerSpec{
		Command: []string{"sh", "-c", `trap "exit 143" TERM; echo ready; sleep 30 & wait`},
	}, true)
	eventually(t, 10*time.Second, "ready", func() (bool, string) {
		l := s.logs(t, id)
		return strings.Contains(l, "ready"), l
	})
	start := time.Now()
	if err := s.rt.StopContainer(ctx(t), id, 10*time.Second); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop of a SIGTERM-honouring process took %v", d)
	}
	st := s.status(t, id)
	if st.State != runtime.StateExited || st.ExitCode != 143 || st.FinishedAt.IsZero() {
		t.Errorf("status after stop = %s code %d finished %v; want exited 143", st.State, st.ExitCode, st.FinishedAt)
	}
	if err := s.rt.StopContainer(ctx(t), id, time.Second); err != nil {
		t.Errorf("second StopContainer: %v", err)
	}

	if !s.caps.Processes {
		return
	}
	// One that ignores SIGTERM is killed after the grace period.
	id = s.create(t, s.rt, runtime.ContainerSpec{Command: []string{"sleep", "30"}}, true)
	start = time.Now()
	if err := s.rt.StopContainer(ctx(t), id, 500*time.Millisecond); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("stop with grace 500ms took %v", d)
	}
	if st := s.status(t, id); st.State != runtime.StateExited || st.ExitCode != 137 {
		t.Errorf("status after SIGKILL = %s code %d; want exited 137", st.State, st.ExitCode)
	}
}

func (s *suite) testExitCodeAndEvents(t *testing.T) {
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	events := s.rt.Events(c)
	id := s.create(t, s.rt, runtime.ContainerSpec{Command: []string{"sh", "-c", "echo bye; exit 3"}}, true)
	st, err := s.rt.WaitContainer(ctx(t), id)
	if err != nil {
		t.Fatalf("WaitContainer: %v", err)
	}
	if st.State != runtime.StateExited || st.ExitCode != 3 || st.Reason != runtime.ReasonError {
		t.Errorf("WaitContainer = %s code %d reason %q; want exited 3 Error", st.State, st.ExitCode, st.Reason)
	}
	if l := s.logs(t, id); l != "bye\n" {
		t.Errorf("logs of exited container = %q, want \"bye\\n\"", l)
	}
	timeout := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-events:
			if ev.ID == id && ev.Type == runtime.EventExited {
				seen = true
				if ev.ExitCode != 3 || ev.Labels["suite-run"] != s.run {
					t.Errorf("exit event = %+v; want code 3 and the container's labels", ev)
				}
			}
		case <-timeout:
			t.Fatal("no exit event within 10s")
		}
	}
	cancel()
	for range events { // closed once ctx ends
	}
}

func (s *suite) testEnvWorkdir(t *testing.T) {
	id := s.create(t, s.rt, runtime.ContainerSpec{
		Command:    []string{"sleep", "30"},
		Env:        []string{"GREETING=hello world", "PATH=/bin"},
		WorkingDir: "/tmp",
	}, true)
	_, env := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"env"}})
	if !strings.Contains(env, "GREETING=hello world\n") || !strings.Contains(env, "PATH=/bin\n") {
		t.Errorf("env = %q; want GREETING and the overridden PATH", env)
	}
	if _, wd := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"pwd"}}); wd != "/tmp\n" {
		t.Errorf("pwd = %q, want /tmp", wd)
	}
}

func (s *suite) testMounts(t *testing.T) {
	if !s.caps.Processes {
		t.Skip("no processes: mounts are not visible")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rw := t.TempDir()
	id := s.create(t, s.rt, runtime.ContainerSpec{
		Command: []string{"sleep", "30"},
		Mounts: []runtime.Mount{
			{Type: runtime.MountBind, Source: dir, Destination: "/data", ReadOnly: true},
			{Type: runtime.MountBind, Source: filepath.Join(dir, "f"), Destination: "/etc/single-file", ReadOnly: true},
			{Type: runtime.MountBind, Source: rw, Destination: "/out"},
			{Type: runtime.MountTmpfs, Destination: "/scratch", SizeBytes: 1 << 20},
		},
		MemoryBytes: 64 << 20,
		CPUMillis:   500,
	}, true)
	code, out := s.exec(t, id, runtime.ExecOptions{Cmd: []string{"sh", "-c",
		`cat /data/f /etc/single-file; touch /data/x 2>/dev/null || echo read-only; echo written > /out/y; grep " /scratch " /proc/mounts | cut -d" " -f3`}})
	want := "from host\nfrom host\nread-only\ntmpfs\n"
	if code != 0 || out != want {
		t.Errorf("mounts: exec = %d, %q; want 0, %q", code, out, want)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "y")); err != nil || string(b) != "written\n" {
		t.Errorf("write through rw bind mount: %q, %v", b, err)
	}
}

func (s *suite) testOOM(t *testing.T) {
	if !s.caps.OOM {
		t.Skip("runtime does not enforce memory limits")
	}
	id := s.create(t, s.rt, runtime.ContainerSpec{
		Command:     []string{"sh", "-c", `x=$(head -c 64m /dev/zero | tr "\0" a); echo survived`},
		MemoryBytes: 16 << 20,
	}, true)
	st, err := s.rt.WaitContainer(ctx(t), id)
	if err != nil {
		t.Fatalf("WaitContainer: %v", err)
	}
	if st.ExitCode != 137 || st.Reason != runtime.ReasonOOMKilled {
		t.Errorf("over the memory limit: exit %d reason %q; want 137 OOMKilled (logs %q)", st.ExitCode, st.Reason, s.logs(t, id))
	}
}

func (s *suite) testAdoption(t *testing.T) {
	if !s.caps.Persistent {
		t.Skip("runtime keeps no state across instances")
	}
	labels := map[string]string{runtime.LabelPodUID: "uid-" + s.run, runtime.LabelContainerName: "main"}
	id := s.create(t, s.rt, runtime.ContainerSpec{Command: []string{"sh", "-c", "echo adopted; sleep 30"}, Labels: labels}, true)

	// A restarted agent has a new Runtime.
	rt2 := s.newRuntime(t, Setup{})
	list, err := rt2.ListContainers(ctx(t), labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].State != runtime.StateRunning || list[0].Labels[runtime.LabelContainerName] != "main" {
		t.Fatalf("ListContainers after restart = %+v; want just %s, running, with its labels", list, id)
	}
	eventually(t, 10*time.Second, "log of adopted container", func() (bool, string) {
		var b bytes.Buffer
		_ = rt2.Logs(ctx(t), id, runtime.LogOptions{Tail: -1}, &b)
		return b.String() == "adopted\n", b.String()
	})
	if other, _ := rt2.ListContainers(ctx(t), map[string]string{runtime.LabelPodUID: "someone-else"}); len(other) != 0 {
		t.Errorf("ListContainers(other uid) = %v, want none", other)
	}
	waited := make(chan runtime.ContainerStatus, 1)
	go func() {
		st, _ := rt2.WaitContainer(context.Background(), id)
		waited <- st
	}()
	if err := rt2.StopContainer(ctx(t), id, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-waited:
		if st.State != runtime.StateExited {
			t.Errorf("WaitContainer after stop = %+v", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitContainer did not return after stop")
	}
}

func (s *suite) testCDI(t *testing.T) {
	dir := t.TempDir()
	spec := `cdiVersion: "0.6.0"
kind: "example.com/gpu"
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: /dev/null
      env:
        - EXAMPLE_VISIBLE_DEVICES=0
`
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := s.newRuntime(t, Setup{CDISpecDirs: []string{dir}})
	if !s.caps.Persistent {
		s.importBusybox(t, rt)
	}
	id := s.create(t, rt, runtime.ContainerSpec{Command: []string{"sleep", "30"}, CDIDevices: []string{"example.com/gpu=0"}}, true)
	st, err := rt.ContainerStatus(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.CDIEdits == nil || !slices.Equal(st.CDIEdits.Devices, []string{"example.com/gpu=0"}) {
		t.Fatalf("CDIEdits = %+v, want the device recorded", st.CDIEdits)
	}
	if _, err := rt.CreateContainer(ctx(t), runtime.ContainerSpec{Image: BusyboxImage, CDIDevices: []string{"no-vendor"}}); !errors.Is(err, runtime.ErrCDIUnresolved) {
		t.Errorf("CreateContainer(bad CDI name) = %v, want ErrCDIUnresolved", err)
	}
	if !s.caps.CDI {
		return
	}
	if !slices.Equal(st.CDIEdits.DeviceNodes, []string{"/dev/nvidia0"}) || !slices.Contains(st.CDIEdits.Env, "EXAMPLE_VISIBLE_DEVICES=0") {
		t.Errorf("CDIEdits = %+v; want /dev/nvidia0 and EXAMPLE_VISIBLE_DEVICES=0", st.CDIEdits)
	}
	var out syncBuffer
	code, err := rt.Exec(ctx(t), id, runtime.ExecOptions{Cmd: []string{"sh", "-c", `test -c /dev/nvidia0 && echo "$EXAMPLE_VISIBLE_DEVICES"`}, Stdout: &out, Stderr: &out})
	if err != nil || code != 0 || out.String() != "0\n" {
		t.Errorf("device and env in container: %d %q %v", code, out.String(), err)
	}
	if _, err := rt.CreateContainer(ctx(t), runtime.ContainerSpec{Image: BusyboxImage, CDIDevices: []string{"example.com/gpu=7"}}); !errors.Is(err, runtime.ErrCDIUnresolved) {
		t.Errorf("CreateContainer(unknown CDI device) = %v, want ErrCDIUnresolved", err)
	}
}

func (s *suite) testRemove(t *testing.T) {
	id := s.create(t, s.rt, runtime.ContainerSpec{Command: []string{"sleep", "30"}}, true)
	if err := s.rt.RemoveContainer(ctx(t), id); err != nil {
		t.Fatalf("RemoveContainer(running): %v", err)
	}
	if _, err := s.rt.ContainerStatus(ctx(t), id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("ContainerStatus after remove = %v, want ErrNotFound", err)
	}
	list, err := s.rt.ListContainers(ctx(t), map[string]string{"suite-run": s.run})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID == id {
			t.Errorf("removed container still listed")
		}
	}
	// The same ID can be used again.
	s.create(t, s.rt, runtime.ContainerSpec{ID: id, Command: []string{"true"}}, false)
}
