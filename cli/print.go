package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api"
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
func age(now time.Time, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// shortAge is kubectl's describe-event age ("3m", "5d"): one unit only.
func shortAge(now time.Time, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.ShortHumanDuration(now.Sub(t))
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
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

// tablePrinter prints objects of one kind as a kubectl table.
type tablePrinter struct {
	w    *tabwriter.Writer
	cols columns
	now  time.Time
	// wide adds -o wide columns; withNamespace adds NAMESPACE in front
	// (-A); showLabels adds LABELS; noHeaders drops the header.
	wide, withNamespace, showLabels, noHeaders bool
	// prefix goes before names when several kinds are printed ("pod/").
	prefix     string
	headerDone bool
}

func newTablePrinter(out io.Writer, k *api.Kind, now time.Time) *tablePrinter {
	return &tablePrinter{w: newTabWriter(out), cols: columnsFor(k), now: now}
}

func (p *tablePrinter) header() {
	if p.noHeaders || p.headerDone {
		return
	}
	p.headerDone = true
	var h []string
	if p.withNamespace {
		h = append(h, "NAMESPACE")
	}
	h = append(h, p.cols.headers...)
	if p.wide {
		h = append(h, p.cols.wide...)
	}
	if p.showLabels {
		h = append(h, "LABELS")
	}
	fmt.Fprintln(p.w, strings.Join(h, "\t"))
}

// row prints one object (the header first, once).
func (p *tablePrinter) row(obj api.Object) {
	p.header()
	cells, wide := p.cols.row(obj, p.now)
	if p.cols.nameCol >= 0 && p.prefix != "" {
		cells[p.cols.nameCol] = p.prefix + cells[p.cols.nameCol]
	}
	var r []string
	if p.withNamespace {
		r = append(r, obj.GetObjectMeta().Namespace)
	}
	r = append(r, cells...)
	if p.wide {
		r = append(r, wide...)
	}
	if p.showLabels {
		r = append(r, labelString(obj.GetObjectMeta().Labels))
	}
	fmt.Fprintln(p.w, strings.Join(r, "\t"))
}

func (p *tablePrinter) flush() error { return p.w.Flush() }
