package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
)

// tablePrinter prints objects of one kind as a kubectl table, with the
// columns of api/table (the ones the API server sends kubectl), laid out
// as kubectl's table printer does.
type tablePrinter struct {
	w    *tabwriter.Writer
	cols []metav1.TableColumnDefinition
	// cells of one object, one per column (table.Printer.Cells).
	cells func(api.Object, time.Time) []any
	now   time.Time
	// wide adds -o wide columns; withNamespace adds NAMESPACE in front
	// (-A); showLabels adds LABELS; noHeaders drops the header.
	wide, withNamespace, showLabels, noHeaders bool
	// prefix goes before names when several kinds are printed ("pod/").
	prefix     string
	headerDone bool
}

func newTablePrinter(out io.Writer, k *api.Kind, now time.Time) *tablePrinter {
	p := table.For(k)
	return &tablePrinter{w: newTabWriter(out), cols: p.Columns, cells: p.Cells, now: now}
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
	h = append(h, table.Headers(p.cols, p.wide)...)
	if p.showLabels {
		h = append(h, "LABELS")
	}
	fmt.Fprintln(p.w, strings.Join(h, "\t"))
}

// row prints one object (the header first, once).
func (p *tablePrinter) row(obj api.Object) {
	p.header()
	cells := p.cells(obj, p.now)
	var r []string
	if p.withNamespace {
		r = append(r, obj.GetObjectMeta().Namespace)
	}
	for i, c := range p.cols {
		if !table.Shown(c, p.wide) {
			continue
		}
		s := table.FormatCell(cells[i])
		if c.Format == "name" {
			s = p.prefix + s
		}
		r = append(r, s)
	}
	if p.showLabels {
		r = append(r, labels.FormatLabels(obj.GetObjectMeta().Labels))
	}
	fmt.Fprintln(p.w, strings.Join(r, "\t"))
}

func (p *tablePrinter) flush() error { return p.w.Flush() }
