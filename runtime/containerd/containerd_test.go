package containerd_test

import (
	"context"
	"testing"

	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/runtime"
	"skiff.dev/skiff/runtime/containerd"
	"skiff.dev/skiff/runtime/runtimetest"
)

// testNamespace keeps test containers apart from a real agent's ("skiff").
const testNamespace = "skiff-test"

func newRuntime(t testing.TB, s runtimetest.Setup) runtime.Runtime {
	t.Helper()
	cfg := containerd.DefaultConfig()
	cfg.Address = testenv.ContainerdAddress(t)
	cfg.Namespace = testNamespace
	cfg.StateDir = t.TempDir()
	cfg.CDISpecDirs = s.CDISpecDirs
	if cfg.CDISpecDirs == nil {
		cfg.CDISpecDirs = []string{t.TempDir()}
	}
	r, err := containerd.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestSuite(t *testing.T) {
	runtimetest.Run(t, newRuntime, runtimetest.Capabilities{Processes: true, OOM: true, CDI: true, Persistent: true})
}
