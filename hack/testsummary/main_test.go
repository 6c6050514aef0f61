package main

import (
	"strings"
	"testing"
)

func run(t *testing.T, input string) (*summary, string, bool) {
	t.Helper()
	var out strings.Builder
	s := newSummary(&out, false)
	for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
		s.line(l)
	}
	ok := s.report("unit")
	return s, out.String(), ok
}

func TestCountsAndAllowedSkip(t *testing.T) {
	s, out, ok := run(t, `
{"Action":"run","Package":"skiff.dev/skiff/integration","Test":"TestA"}
{"Action":"output","Package":"skiff.dev/skiff/integration","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"skiff.dev/skiff/integration","Test":"TestA"}
{"Action":"run","Package":"skiff.dev/skiff/integration","Test":"TestSoak"}
{"Action":"output","Package":"skiff.dev/skiff/integration","Test":"TestSoak","Output":"    soak_test.go:148: a chaos soak\n"}
{"Action":"skip","Package":"skiff.dev/skiff/integration","Test":"TestSoak"}
{"Action":"output","Package":"skiff.dev/skiff/integration","Output":"ok  \tskiff.dev/skiff/integration\t1.0s\n"}
{"Action":"pass","Package":"skiff.dev/skiff/integration"}`)
	if !ok {
		t.Fatalf("an allowed skip failed the tier:\n%s", out)
	}
	if s.ran != 1 || s.passed != 1 || s.skipped != 1 || s.allowed != 1 {
		t.Errorf("counts ran=%d passed=%d skipped=%d allowed=%d, want 1 1 1 1", s.ran, s.passed, s.skipped, s.allowed)
	}
	for _, want := range []string{"ok  \tskiff.dev/skiff/integration", "== unit: 1 tests ran: 1 passed, 0 failed; 1 skipped (1 on the allow-list"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestUnlistedSkipFailsWithItsReason(t *testing.T) {
	_, out, ok := run(t, `
{"Action":"run","Package":"skiff.dev/skiff/integration","Test":"TestPython"}
{"Action":"output","Package":"skiff.dev/skiff/integration","Test":"TestPython","Output":"    python_test.go:63: no python3-kubernetes\n"}
{"Action":"output","Package":"skiff.dev/skiff/integration","Test":"TestPython","Output":"--- SKIP: TestPython (0.00s)\n"}
{"Action":"skip","Package":"skiff.dev/skiff/integration","Test":"TestPython"}`)
	if ok {
		t.Fatalf("a skip not on the allow-list passed:\n%s", out)
	}
	if !strings.Contains(out, "SKIP not allowed: skiff.dev/skiff/integration.TestPython: python_test.go:63: no python3-kubernetes") {
		t.Errorf("the refusal does not name the test and its reason:\n%s", out)
	}
}

func TestFailedTestPrintsItsOutputAndFails(t *testing.T) {
	s, out, ok := run(t, `
the build error line
{"Action":"run","Package":"p","Test":"TestX"}
{"Action":"output","Package":"p","Test":"TestX","Output":"    x_test.go:9: got 1, want 2\n"}
{"Action":"fail","Package":"p","Test":"TestX"}
{"Action":"fail","Package":"p"}`)
	if ok || s.failed != 1 {
		t.Fatalf("a failed test passed the tier (failed=%d):\n%s", s.failed, out)
	}
	for _, want := range []string{"the build error line", "x_test.go:9: got 1, want 2", "FAILED: p.TestX"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestFailedPackageWithoutTestsFails(t *testing.T) {
	_, out, ok := run(t, `
{"Action":"output","Package":"p","Output":"panic: boom\n"}
{"Action":"fail","Package":"p"}`)
	if ok {
		t.Fatalf("a failed package passed the tier:\n%s", out)
	}
}

func TestBuildFailureIsShownAndFails(t *testing.T) {
	_, out, ok := run(t, `
{"ImportPath":"p [p.test]","Action":"build-output","Output":"p/x.go:3:1: syntax error\n"}
{"ImportPath":"p [p.test]","Action":"build-fail"}`)
	if ok || !strings.Contains(out, "p/x.go:3:1: syntax error") {
		t.Fatalf("a build failure passed or was not shown (ok=%v):\n%s", ok, out)
	}
}
