package fake_test

import (
	"context"
	"errors"
	"testing"

	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/fake"
	"skiff.dev/skiff/runtime/runtimetest"
)

func TestSuite(t *testing.T) {
	runtimetest.Run(t, func(t testing.TB, _ runtimetest.Setup) runtime.Runtime {
		r := fake.New(fake.Config{})
		t.Cleanup(func() { r.Close() })
		return r
	}, runtimetest.Capabilities{})
}

func TestPullPolicies(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		cfg     fake.Config
		ref     string
		policy  runtime.PullPolicy
		wantErr error // nil, ErrImageNotFound; pull errors are checked with pull
		pull    bool
	}{
		{name: "present, never", cfg: fake.Config{Images: []string{"busybox"}}, ref: "busybox:latest", policy: runtime.PullNever},
		{name: "absent, never", ref: "busybox", policy: runtime.PullNever, wantErr: runtime.ErrImageNotFound},
		{name: "absent, pullable", cfg: fake.Config{Pullable: []string{"nginx:1.27"}}, ref: "nginx:1.27", policy: runtime.PullIfNotPresent},
		{name: "absent, not pullable", ref: "nginx:1.27", policy: runtime.PullIfNotPresent, wantErr: runtime.ErrImageNotFound, pull: true},
		{name: "pullable all", cfg: fake.DefaultConfig(), ref: "ghcr.io/x/y:v1", policy: runtime.PullAlways},
		{name: "meant to fail", cfg: fake.DefaultConfig(), ref: "nginx:does-not-exist", policy: runtime.PullIfNotPresent, wantErr: runtime.ErrImageNotFound, pull: true},
		{name: "invalid registry", cfg: fake.DefaultConfig(), ref: "registry.invalid/x:1", policy: runtime.PullAlways, wantErr: runtime.ErrImageNotFound, pull: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fake.New(tt.cfg)
			var progress []runtime.PullProgress
			_, err := r.EnsureImage(ctx, tt.ref, tt.policy, func(p runtime.PullProgress) { progress = append(progress, p) })
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("EnsureImage = %v, want %v", err, tt.wantErr)
			}
			var pe *runtime.PullError
			if got := errors.As(err, &pe); got != tt.pull {
				t.Errorf("pull error = %v, want %v", got, tt.pull)
			}
			if err == nil && tt.policy != runtime.PullNever && len(tt.cfg.Images) == 0 && (len(progress) == 0 || !progress[len(progress)-1].Done) {
				t.Errorf("progress = %v, want a final Done report", progress)
			}
		})
	}
}

func TestExitHookOOM(t *testing.T) {
	ctx := context.Background()
	r := fake.New(fake.Config{Images: []string{"busybox"}})
	events := r.Events(ctx)
	id, err := r.CreateContainer(ctx, runtime.ContainerSpec{Image: "busybox", Command: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Exit(id, 137, runtime.ReasonOOMKilled); err != nil {
		t.Fatal(err)
	}
	st, err := r.WaitContainer(ctx, id)
	if err != nil || st.ExitCode != 137 || st.Reason != runtime.ReasonOOMKilled {
		t.Fatalf("WaitContainer = %+v, %v; want 137 OOMKilled", st, err)
	}
	var types []runtime.EventType
	for len(types) < 3 {
		types = append(types, (<-events).Type)
	}
	want := []runtime.EventType{runtime.EventStarted, runtime.EventOOM, runtime.EventExited}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events = %v, want %v", types, want)
		}
	}
	if err := r.Exit(id, 1, ""); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("Exit of exited container = %v, want ErrNotRunning", err)
	}
}

func TestEventsResyncWhenReaderFallsBehind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := fake.New(fake.Config{Images: []string{"busybox"}})
	events := r.Events(ctx)
	// 300 containers that exit at once: 600 events for a 256 buffer.
	for range 300 {
		id, err := r.CreateContainer(ctx, runtime.ContainerSpec{Image: "busybox", Command: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for range 256 {
		<-events
	}
	// The next event after the reader caught up is a resync.
	id, _ := r.CreateContainer(ctx, runtime.ContainerSpec{Image: "busybox", Command: []string{"sleep", "1"}})
	_ = r.StartContainer(ctx, id)
	if ev := <-events; ev.Type != runtime.EventResync {
		t.Errorf("event after loss = %v, want resync", ev.Type)
	}
	cancel()
	for range events {
	}
}

func BenchmarkCreateStart(b *testing.B) {
	ctx := context.Background()
	r := fake.New(fake.Config{Images: []string{"busybox"}})
	for b.Loop() {
		id, err := r.CreateContainer(ctx, runtime.ContainerSpec{Image: "busybox", Command: []string{"sleep", "1000"},
			Labels: map[string]string{runtime.LabelPodUID: "x"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
