package scenario

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestHomeworkTask3 runs examples/homework/task3/scenario.yaml under the
// default configuration (LeastAllocated) and the binpack one, and asserts the
// placements the homework expects, read from the run's results (not only
// from the scenario's own expectations).
func TestHomeworkTask3(t *testing.T) {
	f, err := Load("../examples/homework/task3/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	// Kubernetes' defaults as they are (the file's third configuration)
	// tie-break their way through; `skiff scenario run` shows them.
	start := time.Now()
	results, err := Run(t.Context(), f, Options{Configs: f.resolvedConfigs()[:2]})
	var out bytes.Buffer
	WriteReport(&out, f, results, false)
	t.Logf("ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Config.Name != "default" || results[1].Config.Name != "binpack" {
		t.Fatalf("results for %d configurations, want default and binpack", len(results))
	}
	// After step 3 (B and C): the default spreads, binpack packs.
	nodeOf := func(r *Result, step int, owner string) string {
		t.Helper()
		var nodes []string
		for _, p := range r.Steps[step].Placements {
			if p.Owner == owner && p.Phase != "Succeeded" {
				nodes = append(nodes, p.Node)
			}
		}
		if len(nodes) != 1 {
			t.Fatalf("%s, step %d: %s has pods on %v, want one", r.Config.Name, step+1, owner, nodes)
		}
		return nodes[0]
	}
	def, bin := results[0], results[1]
	a, b, c := nodeOf(def, 2, "job/job-a"), nodeOf(def, 2, "job/job-b"), nodeOf(def, 2, "job/job-c")
	if a == b || b == c || a == c {
		t.Errorf("default: A on %s, B on %s, C on %s: want three nodes (LeastAllocated spreads)", a, b, c)
	}
	if u := def.Steps[2].Usage; u.Fragmented != 12 || u.FreeNodes != 1 {
		t.Errorf("default after C: %s, want 12 fragmented and 1 free node", u)
	}
	a, b, c = nodeOf(bin, 2, "job/job-a"), nodeOf(bin, 2, "job/job-b"), nodeOf(bin, 2, "job/job-c")
	if b != c || a == b {
		t.Errorf("binpack: A on %s, B on %s, C on %s: want B and C together, off A's node (MostAllocated packs)", a, b, c)
	}
	if u := bin.Steps[2].Usage; u.Fragmented != 4 || u.FreeNodes != 2 {
		t.Errorf("binpack after C: %s, want 4 fragmented and 2 free nodes", u)
	}
	// Job E (8 GPUs): Pending under the default, placed under binpack.
	if n := nodeOf(def, 4, "job/job-e"); n != "" {
		t.Errorf("default: job E on %q, want Pending (no whole node left)", n)
	}
	if n := nodeOf(bin, 4, "job/job-e"); n == "" {
		t.Errorf("binpack: job E Pending, want it on the node binpack kept whole")
	}
	// The scheduler's reasons came back from the trace: E's lists every node.
	for _, p := range def.Steps[4].Placements {
		if p.Owner == "job/job-e" && (len(p.Reasons) != 4 || !strings.Contains(strings.Join(p.Reasons, "\n"), "Insufficient nvidia.com/gpu")) {
			t.Errorf("default: job E's reasons %q, want 4 nodes rejected for Insufficient nvidia.com/gpu", p.Reasons)
		}
	}
}
