// Command testsummary reads `go test -json` on stdin and shows what ran:
// each package's ok/FAIL line as go test prints it, the whole output of
// every failed test, every skipped test with its reason, and a last line
// counting the tests that ran, passed, failed and skipped. hack/test.sh
// pipes each tier through it.
//
// A skip is a failure unless it is on the allow-list below: a test that
// skips in the test command proves nothing, so a missing prerequisite
// (a package not installed, a test that only works after another one)
// must fail loudly instead of passing by skipping. The list is short and
// each entry says why the skip is right in CI.
//
//	go test -json ./... | go run ./hack/testsummary -tier unit
//
// Exit status: 1 when a test or package failed or a skip is not allowed,
// 0 otherwise (hack/test.sh also checks go test's own status).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// allowedSkips names the skips that are right in the test command, as a
// regular expression over "PACKAGE.TEST" (subtests "TEST/SUB"), and why.
var allowedSkips = []struct {
	pattern *regexp.Regexp
	why     string
}{
	{regexp.MustCompile(`^skiff\.dev/skiff/integration\.TestSoak$`), "the chaos soak runs as its own step (SKIFF_SOAK=short)"},
	{regexp.MustCompile(`^skiff\.dev/skiff/integration\.TestBench`), "benchmarks are opt-in (SKIFF_BENCH=1, hack/bench.sh)"},
	{regexp.MustCompile(`^skiff\.dev/skiff/controlplane/apiserver\.TestFloodLatency$`), "a measurement, opt-in (SKIFF_BENCH=1)"},
	{regexp.MustCompile(`^skiff\.dev/skiff/(runtime/containerd|agent/proxy)\.TestMeasure`), "measurements are opt-in (SKIFF_MEASURE=1)"},
	{regexp.MustCompile(`^skiff\.dev/skiff/runtime/containerd\.(TestSurvivesContainerdRestart|TestStartAfterHalfMadeTask)$`), "kills the shared test containerd: opt-in (SKIFF_TEST_CONTAINERD_RESTART=1)"},
	// Behaviour suites run against every implementation; a capability an
	// implementation does not have (the fake runtime runs no processes,
	// the fake client allocates no Service addresses) skips its checks.
	{regexp.MustCompile(`^skiff\.dev/skiff/runtime/fake\.TestSuite/`), "the fake runtime runs no processes (runtimetest.Capabilities)"},
	{regexp.MustCompile(`^skiff\.dev/skiff/client/fake\.TestSuite/(Namespaces|ServiceAllocation)$`), "the fake client does not check namespaces or allocate addresses (clienttest)"},
	// Table-driven over example files: a file that is not for this command.
	{regexp.MustCompile(`^skiff\.dev/skiff/cli\.TestApplyTwiceIsUnchanged/`), "an example for create -f or with no objects (apply needs names)"},
}

type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// ImportPath names the package of a build-output or build-fail event.
	ImportPath string
}

type key struct{ pkg, test string }

type summary struct {
	out                          io.Writer
	verbose                      bool
	ran, passed, failed, skipped int
	allowed                      int
	notAllowed, failedTests      []string
	failedPkgs                   []string
	output                       map[key][]string
	allow                        func(name string) bool
}

func newSummary(out io.Writer, verbose bool) *summary {
	return &summary{out: out, verbose: verbose, output: map[key][]string{}, allow: allowed}
}

func allowed(name string) bool {
	for _, a := range allowedSkips {
		if a.pattern.MatchString(name) {
			return true
		}
	}
	return false
}

// line handles one line of go test -json; anything that is not an event
// (a build error printed before the JSON starts) is passed through.
func (s *summary) line(l string) {
	var e event
	if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &e) != nil {
		fmt.Fprintln(s.out, l)
		return
	}
	if e.Test == "" {
		s.packageEvent(e)
		return
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "output":
		if s.verbose {
			fmt.Fprint(s.out, e.Output)
		}
		s.output[k] = append(s.output[k], e.Output)
	case "pass":
		s.ran++
		s.passed++
		delete(s.output, k)
	case "fail":
		s.ran++
		s.failed++
		s.failedTests = append(s.failedTests, e.Package+"."+e.Test)
		if !s.verbose {
			fmt.Fprint(s.out, strings.Join(s.output[k], ""))
		}
		delete(s.output, k)
	case "skip":
		s.skipped++
		name := e.Package + "." + e.Test
		reason := skipReason(s.output[k])
		delete(s.output, k)
		if s.allow(name) {
			s.allowed++
			return
		}
		s.notAllowed = append(s.notAllowed, name+": "+reason)
	}
}

func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "output":
		// go test's own lines (ok, FAIL, coverage, panics outside a test).
		if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") && e.Output != "PASS\n" && e.Output != "FAIL\n" {
			fmt.Fprint(s.out, e.Output)
		}
	case "fail":
		s.failedPkgs = append(s.failedPkgs, e.Package)
	case "build-output": // go 1.24+: a build error, as JSON
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.failedPkgs = append(s.failedPkgs, e.ImportPath)
	}
}

// skipReason is what the test logged before skipping (its t.Skip words).
func skipReason(lines []string) string {
	var r []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = append(r, t)
	}
	if len(r) == 0 {
		return "(no reason given)"
	}
	return strings.Join(r, " ")
}

// report prints the counts and what went wrong; it returns whether the
// tier passed.
func (s *summary) report(tier string) bool {
	sort.Strings(s.notAllowed)
	for _, n := range s.notAllowed {
		fmt.Fprintf(s.out, "SKIP not allowed: %s\n", n)
	}
	for _, n := range s.failedTests {
		fmt.Fprintf(s.out, "FAILED: %s\n", n)
	}
	fmt.Fprintf(s.out, "== %s: %d tests ran: %d passed, %d failed; %d skipped (%d on the allow-list of hack/testsummary, %d not)\n",
		tier, s.ran, s.passed, s.failed, s.skipped, s.allowed, len(s.notAllowed))
	return s.failed == 0 && len(s.failedPkgs) == 0 && len(s.notAllowed) == 0
}

func main() {
	tier := flag.String("tier", "tests", "the tier's name in the last line")
	verbose := flag.Bool("v", false, "print every test's output as it comes (as go test -v)")
	flag.Parse()
	s := newSummary(os.Stdout, *verbose)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		s.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary: read:", err)
		os.Exit(1)
	}
	if !s.report(*tier) {
		os.Exit(1)
	}
}
