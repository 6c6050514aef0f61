package cli

import (
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api/table"
)

// Table layout of kubectl's printers (tabwriter settings included), so
// columns line up the way students are used to.
const (
	tabMinWidth = 6
	tabWidth    = 4
	tabPadding  = 3
)

// newTabWriter returns kubectl's table writer. (kubectl's fork of
// tabwriter also remembers widths across flushes for get -w; the standard
// one sizes each flush on its own.)
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, tabMinWidth, tabWidth, tabPadding, ' ', 0)
}

// age formats the time since t like kubectl: 5s, 3m12s, 2d, 4y17d.
func age(now time.Time, t time.Time) string { return table.Age(now, t) }

// shortAge is kubectl's describe-event age ("3m", "5d"): one unit only.
func shortAge(now time.Time, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.ShortHumanDuration(now.Sub(t))
}

// labelString is "a=b,c=d" sorted by key, or "<none>".
func labelString(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
