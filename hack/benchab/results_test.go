package main

import (
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want summary
	}{
		{nil, summary{}},
		{[]float64{5}, summary{1, 5, 5, 5}},
		{[]float64{3, 1, 2}, summary{3, 1, 2, 3}},
		{[]float64{4, 1, 3, 2}, summary{4, 1, 2.5, 4}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v; want %+v", tc.in, got, tc.want)
		}
	}
}

func TestRatioAndNumbers(t *testing.T) {
	a, b := summarize([]float64{1000, 2000, 3000}), summarize([]float64{2600, 2500, 2400})
	if got := ratio(a, b); got != "1.25×" {
		t.Errorf("ratio = %q; want 1.25×", got)
	}
	if got := ratio(summary{}, b); got != "—" {
		t.Errorf("ratio without A = %q; want —", got)
	}
	if got := a.String(); got != "1,000 / 2,000 / 3,000" {
		t.Errorf("summary = %q", got)
	}
	for v, want := range map[float64]string{1234567: "1,234,567", 250.4: "250", 38.71: "38.7", 0.126: "0.13", -1500: "-1,500"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q; want %q", v, got, want)
		}
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP apiserver_watchers Open watch streams by resource.
apiserver_watchers{resource="pods"} 3
apiserver_watchers{resource="nodes"} 2
apiserver_watchers_other 100
skiff_store_watchers 17
`
	if got := metricSum(text, "apiserver_watchers"); got != 5 {
		t.Errorf("apiserver_watchers = %v; want 5", got)
	}
	if got := metricSum(text, "skiff_store_watchers"); got != 17 {
		t.Errorf("skiff_store_watchers = %v; want 17", got)
	}
}

func TestTablePrintsEveryFigureWithItsRatio(t *testing.T) {
	r := newResults()
	r.add("api", "A", 0, figures{"creates_per_s": 2000, "p99_ms": 40})
	r.add("api", "B", 0, figures{"creates_per_s": 3000, "p99_ms": 20})
	r.add("sched-dra", "B", 0, figures{"pods_per_s": 50})
	var sb strings.Builder
	benches, err := selectBenches("api,sched-dra")
	if err != nil {
		t.Fatal(err)
	}
	r.print(&sb, benches, [2]build{{name: "old"}, {name: "new"}})
	out := sb.String()
	for _, want := range []string{
		"| api | creates/s | 2,000 | 3,000 | 1.50× | 1.50× |",
		"| api | p99 ms ↓ | 40.0 | 20.0 | 0.50× | 0.50× |",
		"| sched-dra | pods/s | — | 50.0 | — | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// api-secure's B is also set against the plain api's A (the goal
// for the classroom configuration: ≥ 1.0× the old build's plain figure),
// including when A has no api-secure (an older build).
func TestTableComparesSecureWithPlainA(t *testing.T) {
	r := newResults()
	r.add("api", "A", 0, figures{"creates_per_s": 2000, "p99_ms": 40})
	r.add("api", "B", 0, figures{"creates_per_s": 3000, "p99_ms": 20})
	r.add("api-secure", "B", 0, figures{"creates_per_s": 2500, "p99_ms": 30})
	benches, err := selectBenches("api,api-secure")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	r.print(&sb, benches, [2]build{{name: "old"}, {name: "new"}})
	out := sb.String()
	for _, want := range []string{
		"| api-secure | creates/s | — | 2,500 | — | — |",
		"| api-secure (B) vs api (A) | creates/s | 2,000 | 2,500 | 1.25× | 1.25× |",
		"| api-secure (B) vs api (A) | p99 ms ↓ | 40.0 | 30.0 | 0.75× | 0.75× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Each round's B/A pairs the two runs of one round, which ran back to
// back. Here the machine is twice as fast in some rounds as in others,
// and B is 1.30× A in two rounds and 1.25× in the third: the rounds'
// ratios say so (1.25 / 1.30 / 1.30×), while the ratio of the medians
// takes A's and B's medians from different rounds (800 and 1,000:
// 1.25×). A round with one side missing pairs with nothing.
func TestByRoundPairsTheRoundsRuns(t *testing.T) {
	r := newResults()
	for round, pair := range [][2]float64{{1000, 1300}, {500, 650}, {800, 1000}} {
		r.add("api", "A", round, figures{"creates_per_s": pair[0]})
		r.add("api", "B", round, figures{"creates_per_s": pair[1]})
	}
	r.add("api", "B", 3, figures{"creates_per_s": 9000}) // no A in round 3
	got := byRound(r.values["api"]["creates_per_s"]["A"], r.values["api"]["creates_per_s"]["B"])
	if got.n != 3 || got.min != 1.25 || got.median != 1.3 || got.max != 1.3 {
		t.Errorf("byRound = %+v; want 1.25 / 1.30 / 1.30 of 3", got)
	}
	if got := ratios(summary{}); got != "—" {
		t.Errorf("ratios of none = %q; want —", got)
	}
	var sb strings.Builder
	benches, err := selectBenches("api")
	if err != nil {
		t.Fatal(err)
	}
	r.print(&sb, benches, [2]build{{name: "old"}, {name: "new"}})
	if want := "| api | creates/s | 500 / 800 / 1,000 | 650 / 1,150 / 9,000 | 1.44× | 1.25 / 1.30 / 1.30× |"; !strings.Contains(sb.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, sb.String())
	}
}

func TestSelectBenches(t *testing.T) {
	got, err := selectBenches("sched,api")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range got {
		names = append(names, b.name)
	}
	if strings.Join(names, ",") != "sched-plain,sched-gpu,sched-unschedulable,sched-spread,sched-dra,api" {
		t.Errorf("selected %v", names)
	}
	if _, err := selectBenches("api,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown benchmark: err = %v", err)
	}
}

// 50 clients of 200 creates: each first create (its connection's
// handshake) takes 100 ms, the others 1 ms but for 60 of 50 ms and 60 of
// 2 ms. Above the p99 of all 10,000 lie 100 creates, the 50 firsts and 50
// of the 50 ms ones, so it is a 50 ms one; of the 9,950 after the
// firsts, 99 lie above it, so it is a 2 ms one.
func TestLatencyFiguresSetTheFirstCreatesApart(t *testing.T) {
	lats := make([][]time.Duration, 50)
	slow, slower := 60, 60
	for w := range lats {
		lats[w] = append(lats[w], 100*time.Millisecond)
		for range 199 {
			d := time.Millisecond
			switch {
			case slower > 0:
				d, slower = 50*time.Millisecond, slower-1
			case slow > 0:
				d, slow = 2*time.Millisecond, slow-1
			}
			lats[w] = append(lats[w], d)
		}
	}
	f := latencyFigures(lats, 2*time.Second)
	for name, want := range map[string]float64{
		"creates_per_s":      5000,
		"p50_ms":             1,
		"p99_ms":             50,
		"first_p50_ms":       100,
		"p99_after_first_ms": 2,
	} {
		if f[name] != want {
			t.Errorf("%s = %v, want %v", name, f[name], want)
		}
	}
}
