package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenarioRunUnmet: `skiff scenario run` prints the report and exits
// 1, naming the unmet expectation, on stderr.
func TestScenarioRunUnmet(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.yaml")
	data := `apiVersion: skiff.dev/v1alpha1
kind: Scenario
metadata: {name: ghost}
nodes: [{name: gpu, gpus: 8}]
steps:
- name: nothing happens
  advance: 1m
  expect:
  - maxFragmentedGPUs: 0
  - pods: pod/ghost
    running: true
`
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := Main(t.Context(), []string{"scenario", "run", p}, &stdout, &stderr)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("exit %v, want status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	want := "configuration default, step 1 (nothing happens): pod/ghost running true: no pods"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not name %q", stderr.String(), want)
	}
	for _, w := range []string{"Step 1: nothing happens", "ok      maxFragmentedGPUs 0", "FAILED  pod/ghost running true: no pods", "GPUs 0/8 (0%)"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, stdout.String())
		}
	}
	// Bad input: a clear error, nothing run.
	err = Main(t.Context(), []string{"scenario", "run", p, "--config", "Bad_Name=" + p}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `--config "Bad_Name=`) {
		t.Errorf("a bad --config: %v", err)
	}
}
