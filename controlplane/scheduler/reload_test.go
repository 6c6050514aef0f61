package scheduler

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
	"skiff.dev/skiff/internal/testwait"
)

// syncBuffer is a log sink safe for the watcher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const spreadConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
`

const binpackConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: nvidia.com/gpu, weight: 1}]
`

func fitStrategy(s *Scheduler) v1.ScoringStrategyType {
	a, _ := s.Config().Profiles[0].Args(plugins.NodeResourcesFitName).(*v1.NodeResourcesFitArgs)
	if a == nil {
		return ""
	}
	return a.ScoringStrategy.Type
}

// A change to the file is applied without a restart; an invalid one is
// refused, logged, and the running configuration stays.
func TestRunnerAppliesChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(spreadConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c := fake.New(gpuNode("empty", 8), gpuNode("half", 8), gpuPod("running", 4, onNode("half")))
	var logs syncBuffer
	r, err := NewRunner(c, path, Options{Recorder: &events{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	placed := func(name, want string) {
		t.Helper()
		testwait.For(t, 15*time.Second, name+" bound to "+want, func() bool {
			p, err := client.Get[*api.Pod](ctx, c, "gpu-demo", name)
			return err == nil && p.Spec.NodeName == want
		})
	}
	if _, err := c.Create(ctx, gpuPod("first", 1)); err != nil {
		t.Fatal(err)
	}
	placed("first", "empty") // LeastAllocated

	write := func(s string) {
		t.Helper()
		tmp := path + ".new" // as editors do: a new file renamed over the old
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(binpackConfig)
	testwait.For(t, 15*time.Second, "the binpack configuration running", func() bool { return fitStrategy(r.Current()) == v1.MostAllocated })
	if _, err := c.Create(ctx, gpuPod("second", 1)); err != nil {
		t.Fatal(err)
	}
	placed("second", "half") // MostAllocated: half holds 4, empty 1

	before := r.Current()
	write(strings.Replace(binpackConfig, "MostAllocated", "Binpack", 1))
	testwait.For(t, 15*time.Second, "the refusal logged", func() bool {
		return strings.Contains(logs.String(), "scheduler config change refused") && strings.Contains(logs.String(), `Unsupported value: \"Binpack\"`)
	})
	write(binpackConfig + "  plugins:\n    score:\n      enabled:\n      - name: NoSuchPlugin\n")
	testwait.For(t, 15*time.Second, "the unbuildable change refused", func() bool {
		return strings.Contains(logs.String(), `ScorePlugin \"NoSuchPlugin\" does not exist`)
	})
	if r.Current() != before || fitStrategy(r.Current()) != v1.MostAllocated {
		t.Fatal("an invalid change replaced the running scheduler")
	}
	if _, err := c.Create(ctx, gpuPod("third", 1)); err != nil {
		t.Fatal(err)
	}
	placed("third", "half")
}

func TestRunnerRefusesInvalidFileAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: skiff.dev/v1alpha1\nkind: SchedulerConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewRunner(fake.New(), path, Options{Recorder: &events{}})
	if err == nil || !strings.Contains(err.Error(), "kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration") {
		t.Fatalf("err = %v", err)
	}
}
