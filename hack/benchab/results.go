package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// figureInfo says how to print a figure and which way is better.
type figureInfo struct {
	label       string
	lowerBetter bool
}

// figureInfos by figure name, in the order the table prints them.
var figureOrder = []string{
	"creates_per_s", "p50_ms", "p99_ms", "first_p50_ms", "p99_after_first_ms",
	"server_cpu_us", "client_cpu_us", "server_alloc_kib", "server_gcs", "server_live_mib",
	"writes_per_s", "write_p99_ms", "single_writes_per_s",
	"pods_per_s", "cpu_ms_per_pod", "alloc_kib_per_pod", "sched_gcs", "rss_mib", "peak_rss_mib",
	"plateau_mib", "plateau_anon_mib", "plateau_file_mib", "heap_inuse_mib", "next_gc_mib",
	"creating_peak_mib", "peak_mib", "ready_s", "delete_s", "store_watchers", "api_watchers",
}

var figureInfos = map[string]figureInfo{
	"creates_per_s":       {label: "creates/s"},
	"p50_ms":              {label: "p50 ms", lowerBetter: true},
	"p99_ms":              {label: "p99 ms", lowerBetter: true},
	"first_p50_ms":        {label: "a client's first create (its TLS handshake), median ms", lowerBetter: true},
	"p99_after_first_ms":  {label: "p99 ms of the creates after each client's first", lowerBetter: true},
	"server_cpu_us":       {label: "server CPU µs a create (user + system)", lowerBetter: true},
	"client_cpu_us":       {label: "the clients' CPU µs a create (the harness's own)", lowerBetter: true},
	"server_alloc_kib":    {label: "server KiB allocated a create (its heap, the whole process)", lowerBetter: true},
	"server_gcs":          {label: "the server's collections during the load", lowerBetter: true},
	"server_live_mib":     {label: "the server's live heap MiB after the load", lowerBetter: true},
	"writes_per_s":        {label: "writes/s (concurrent writers)"},
	"write_p99_ms":        {label: "write p99 ms", lowerBetter: true},
	"single_writes_per_s": {label: "writes/s (one writer)"},
	"pods_per_s":          {label: "pods/s"},
	"cpu_ms_per_pod":      {label: "CPU ms a pod (the whole process, user + system)", lowerBetter: true},
	"alloc_kib_per_pod":   {label: "KiB allocated a pod (the whole process)", lowerBetter: true},
	"sched_gcs":           {label: "collections during the run", lowerBetter: true},
	"rss_mib":             {label: "RSS MiB (process at the end)", lowerBetter: true},
	"peak_rss_mib":        {label: "peak RSS MiB", lowerBetter: true},
	"plateau_mib":         {label: "server RSS MiB, plateau", lowerBetter: true},
	"plateau_anon_mib":    {label: "of it anonymous (heap, stacks, runtime)", lowerBetter: true},
	"plateau_file_mib":    {label: "of it file pages (binary, bbolt's mmap)", lowerBetter: true},
	"heap_inuse_mib":      {label: "Go heap in use MiB, plateau", lowerBetter: true},
	"next_gc_mib":         {label: "Go heap goal MiB (next GC), plateau", lowerBetter: true},
	"creating_peak_mib":   {label: "server RSS MiB, creating peak", lowerBetter: true},
	"peak_mib":            {label: "server RSS MiB, peak (deleting included)", lowerBetter: true},
	"ready_s":             {label: "s until every pod is ready", lowerBetter: true},
	"delete_s":            {label: "s to delete the namespace", lowerBetter: true},
	"store_watchers":      {label: "store watch streams (server process)", lowerBetter: true},
	"api_watchers":        {label: "API watch streams", lowerBetter: true},
}

// run is one benchmark run's figures.
type runRecord struct {
	Bench   string  `json:"bench"`
	Build   string  `json:"build"`
	Figures figures `json:"figures"`
}

type results struct {
	runs []runRecord
	// values[bench][figure][build label][round]: each figure by the round
	// it was measured in (from 0), for the rounds' own ratios (byRound).
	values map[string]map[string]map[string]map[int]float64
}

func newResults() *results {
	return &results{values: map[string]map[string]map[string]map[int]float64{}}
}

// add records one run's figures, measured in round (from 0).
func (r *results) add(benchName, label string, round int, f figures) {
	r.runs = append(r.runs, runRecord{Bench: benchName, Build: label, Figures: f})
	if r.values[benchName] == nil {
		r.values[benchName] = map[string]map[string]map[int]float64{}
	}
	for k, v := range f {
		if r.values[benchName][k] == nil {
			r.values[benchName][k] = map[string]map[int]float64{}
		}
		if r.values[benchName][k][label] == nil {
			r.values[benchName][k][label] = map[int]float64{}
		}
		r.values[benchName][k][label][round] = v
	}
}

// byRound is B/A of each round where both have the figure (A not 0):
// A and B of a round run back to back, so the machine's drift from round
// to round, which the ratio of the medians keeps, mostly cancels in
// them. Its summary is the table's last column.
func byRound(a, b map[int]float64) summary {
	var rs []float64
	for round, av := range a {
		if bv, ok := b[round]; ok && av != 0 {
			rs = append(rs, bv/av)
		}
	}
	return summarize(rs)
}

// ratios prints a summary of ratios as "min / median / max×", "—" when
// there are none.
func ratios(s summary) string {
	if s.n == 0 {
		return "—"
	}
	if s.n == 1 {
		return times(s.median)
	}
	return twoDigits(s.min) + " / " + twoDigits(s.median) + " / " + times(s.max)
}

// summary is min / median / max of some runs.
type summary struct {
	n                int
	min, median, max float64
}

// summarizeRounds is summarize of a build's figure over its rounds.
func summarizeRounds(byRound map[int]float64) summary {
	return summarize(slices.Collect(maps.Values(byRound)))
}

func summarize(vs []float64) summary {
	if len(vs) == 0 {
		return summary{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{n: len(s), min: s[0], median: med, max: s[len(s)-1]}
}

func (s summary) String() string {
	if s.n == 0 {
		return "—"
	}
	if s.n == 1 {
		return num(s.median)
	}
	return num(s.min) + " / " + num(s.median) + " / " + num(s.max)
}

// ratio is B/A of the medians, "—" when either is missing or A is 0.
func ratio(a, b summary) string {
	if a.n == 0 || b.n == 0 || a.median == 0 {
		return "—"
	}
	return times(b.median / a.median)
}

// times prints a ratio: two decimals and "×".
func times(v float64) string { return twoDigits(v) + "×" }

func twoDigits(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// num prints a figure with as many digits as it deserves.
func num(v float64) string {
	switch av := max(v, -v); {
	case av >= 1000:
		return thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case av >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case av >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// print writes the table: a row per benchmark and figure.
func (r *results) print(w io.Writer, benches []bench, builds [2]build) {
	fmt.Fprintf(w, "A = %s, B = %s. Each cell: min / median / max over the rounds; B/A: ratio of the medians; B/A by round: min / median / max of each round's B/A (↓: lower is better).\n\n", builds[0].name, builds[1].name)
	fmt.Fprintf(w, "| benchmark | figure | A | B | B/A | B/A by round |\n|---|---|---|---|---|---|\n")
	for _, bn := range benches {
		figs := r.values[bn.name]
		for _, k := range orderedFigures(figs) {
			a, b := summarizeRounds(figs[k]["A"]), summarizeRounds(figs[k]["B"])
			paired := byRound(figs[k]["A"], figs[k]["B"])
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", bn.name, figureLabel(k), a, b, ratio(a, b), ratios(paired))
		}
		if len(figs) == 0 {
			fmt.Fprintf(w, "| %s | (not run: neither build has it) | — | — | — | — |\n", bn.name)
		}
		if bn.vs == "" {
			continue
		}
		// B's figures of this benchmark against A's of the one it is
		// measured against (api-secure's B vs plain api's A).
		for _, k := range orderedFigures(figs) {
			base, ok := r.values[bn.vs][k]
			if !ok {
				continue
			}
			a, b := summarizeRounds(base["A"]), summarizeRounds(figs[k]["B"])
			paired := byRound(base["A"], figs[k]["B"])
			fmt.Fprintf(w, "| %s (B) vs %s (A) | %s | %s | %s | %s | %s |\n", bn.name, bn.vs, figureLabel(k), a, b, ratio(a, b), ratios(paired))
		}
	}
}

// figureLabel is how the table names figure k: its label (the name
// itself for an unknown one), with "↓" where lower is better.
func figureLabel(k string) string {
	info, ok := figureInfos[k]
	if !ok {
		info = figureInfo{label: k}
	}
	if info.lowerBetter {
		return info.label + " ↓"
	}
	return info.label
}

// orderedFigures lists the figures of a benchmark, known ones first in
// figureOrder, then the rest sorted.
func orderedFigures(figs map[string]map[string]map[int]float64) []string {
	var out []string
	for _, k := range figureOrder {
		if _, ok := figs[k]; ok {
			out = append(out, k)
		}
	}
	var rest []string
	for k := range figs {
		if !slices.Contains(figureOrder, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
