package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// The trace's compact tables (api.SchedulingFilterTable and
// SchedulingScoreTable) read back, and encode, as the rows a reader
// expects, built here the plain way: a row for each of the first
// maxTraceNodes nodes looked at; the best maxTraceNodes feasible nodes'
// scores, best first, ties by name (and selectHost picks the first).
func TestTraceTablesAreTheRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	for round := range 300 {
		r := &CycleResult{FilterPlugins: []string{"NodeName", "NodeResourcesFit", "TaintToleration"}}
		np := rng.IntN(4)
		for p := range np {
			r.ScorePlugins = append(r.ScorePlugins, ScorePluginInfo{Name: fmt.Sprint("score", p), Weight: int64(1 + p)})
		}
		n := []int{0, 1, 7, maxTraceNodes, maxTraceNodes + 1, 250}[rng.IntN(6)]
		r.NumNodes = n + rng.IntN(10)
		// Node names are unique and come as the scheduler looks at them:
		// round robin over the name-sorted snapshot from a random start.
		names := rng.Perm(400)[:n]
		slices.Sort(names)
		if n > 0 {
			start := rng.IntN(n)
			names = append(names[start:], names[:start]...)
		}
		// Scores past int16 (and past int32) go to the wide table.
		wide := rng.IntN(5)
		for i := range n {
			nr := NodeFilterResult{Node: fmt.Sprintf("node-%03d", names[i]), Plugin: -1}
			switch rng.IntN(4) {
			case 0:
				nr.Plugin = rng.IntN(len(r.FilterPlugins))
				nr.Status = framework.NewStatus(framework.Unschedulable, "Insufficient cpu")
				if rng.IntN(2) == 0 {
					nr.Status = nr.Status.WithDetails("wanted 2, free 1")
				}
			case 1:
				nr.Status = framework.NewStatus(framework.Success, "passed with a note")
			}
			r.Nodes = append(r.Nodes, nr)
			if nr.Feasible() {
				s := NodeScoreResult{Node: nr.Node, Raw: make([]int64, np), Normalized: make([]int64, np)}
				for p := range np {
					s.Raw[p], s.Normalized[p] = rng.Int64N(1000)-100, rng.Int64N(101)
					switch wide {
					case 0:
						s.Raw[p] = rng.Int64N(80_000) - 40_000 // past int16 mostly
					case 1:
						s.Raw[p] = rng.Int64() - 1<<62 // past int32
					}
					s.Total += s.Normalized[p] * r.ScorePlugins[p].Weight
				}
				if rng.IntN(3) == 0 {
					s.Total = 50 // ties, broken by name
				}
				r.Scores = append(r.Scores, s)
			}
		}
		r.findNameFirst() // as score does
		if len(r.Scores) > 0 {
			r.SelectedNode = r.Scores[0].Node
		}

		var wantFilter []FilterRow
		for i, nr := range r.Nodes {
			if i == maxTraceNodes {
				break
			}
			row := FilterRow{Node: nr.Node, Fit: nr.Feasible(), Reasons: nr.Status.Reasons(), Details: nr.Status.Details()}
			if !row.Fit {
				row.Plugin = r.FilterPlugins[nr.Plugin]
			}
			wantFilter = append(wantFilter, row)
		}
		var wantScore []ScoreRow
		for _, s := range r.Scores {
			wantScore = append(wantScore, ScoreRow{Node: s.Node, Raw: s.Raw, Normalized: s.Normalized, Total: s.Total})
		}
		slices.SortFunc(wantScore, func(a, b ScoreRow) int {
			if a.Total != b.Total {
				return cmp.Compare(b.Total, a.Total)
			}
			return strings.Compare(a.Node, b.Node)
		})
		if len(wantScore) > maxTraceNodes {
			wantScore = wantScore[:maxTraceNodes]
		}

		if len(wantScore) > 0 && r.selectHost() != wantScore[0].Node {
			t.Fatalf("round %d: selectHost chose %s, want %s (best total, ties by name)", round, r.selectHost(), wantScore[0].Node)
		}
		fd, sd := r.filterDetails(), r.scoreDetails()
		if !reflect.DeepEqual(fd.Nodes, wantFilter) || fd.Omitted != max(0, len(r.Nodes)-maxTraceNodes) {
			t.Fatalf("round %d: filter rows\n got %+v (omitted %d)\nwant %+v", round, fd.Nodes, fd.Omitted, wantFilter)
		}
		if len(r.Scores) > 0 && (!reflect.DeepEqual(sd.Nodes, wantScore) || sd.Omitted != max(0, len(r.Scores)-maxTraceNodes)) {
			t.Fatalf("round %d: score rows\n got %+v (omitted %d)\nwant %+v", round, sd.Nodes, sd.Omitted, wantScore)
		}
		// The spans carry the tables; their JSON is the rows'.
		for _, span := range traceSpans(r, r.Start, r.Start, nil) {
			var want any
			switch span.Step {
			case "filter":
				want = wantFilter
			case "score":
				want = wantScore
			default:
				continue
			}
			got, err := json.Marshal(span.Details["nodes"])
			if err != nil {
				t.Fatal(err)
			}
			if w, _ := json.Marshal(want); string(got) != string(w) {
				t.Fatalf("round %d: %s span's nodes encode as\n%s\nwant\n%s", round, span.Step, got, w)
			}
		}
	}
}

// BenchmarkScoreTable is the trace's score table for one pod of
// bench-scheduler's plain variant: 500 feasible nodes of 5,000, in name
// order, their totals tied three ways (identical nodes), so that picking
// the best 100 mostly compares the ties.
func BenchmarkScoreTable(b *testing.B) {
	r := &CycleResult{}
	for i := range 500 {
		r.Scores = append(r.Scores, NodeScoreResult{Node: fmt.Sprintf("node-%05d", 4500+i), Raw: make([]int64, 6), Normalized: make([]int64, 6), Total: int64(300 + i%3)})
	}
	b.ReportAllocs()
	for b.Loop() {
		r.scoreTable()
	}
}
