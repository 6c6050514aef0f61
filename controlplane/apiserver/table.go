package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1beta1/validation"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
)

// Server-side Table output, negotiated as kube-apiserver does: a get, list
// or watch whose Accept header asks for
//
//	application/json;as=Table;v=v1;g=meta.k8s.io   (or v=v1beta1)
//
// is answered with a meta.k8s.io Table: the columns and cells of the kind
// (api/table, Kubernetes' printers) and, per row, the object as
// PartialObjectMetadata (?includeObject=Metadata, the default), whole
// (Object) or not at all (None). kubectl sends that clause first, then
// plain application/json as its fallback; the first acceptable clause
// wins. A header naming only conversions skiff does not make (as=Foo,
// v=v2) gets 406 Not Acceptable, as kube-apiserver. Plain JSON stays the
// default. A watch streams events whose object is a Table of one row;
// only the first carries the column definitions (kube-apiserver's
// watchEmbeddedEncoder sets NoHeaders after the first event, and kubectl
// reuses the columns it has).

// servedMediaTypes are the response media types skiff produces, as the
// 406 message lists them.
var servedMediaTypes = []string{"application/json"}

// tableOutput is a negotiated Table response.
type tableOutput struct {
	// groupVersion of the Table: meta.k8s.io/v1 or meta.k8s.io/v1beta1.
	groupVersion string
	// include is what each row carries of its object: Metadata, Object or None.
	include metav1.IncludeObjectPolicy
	// noHeaders leaves out the column definitions (watch events after the first).
	noHeaders bool
	// printer returns the printer of a kind (nil: table.For); the
	// server's has read-time cells (table_kueue.go).
	printer func(*api.Kind) table.Printer
}

// negotiateOutput reads the Accept header (and ?includeObject=): nil for
// plain JSON, a tableOutput for a Table, or a 406 / 400 Status error.
func negotiateOutput(r *http.Request) (*tableOutput, error) {
	header := r.Header.Get("Accept")
	if strings.TrimSpace(header) == "" {
		return nil, nil
	}
	for _, clause := range goautoneg.ParseAccept(header) {
		if !(clause.Type == "application" && (clause.SubType == "json" || clause.SubType == "*") ||
			clause.Type == "*" && clause.SubType == "*") {
			continue
		}
		gvk, convert, ok := conversion(clause.Params)
		if !ok {
			continue // a conversion skiff does not make: try the next clause
		}
		if !convert {
			return nil, nil
		}
		opts := metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
		switch errs := validation.ValidateTableOptions(&opts); len(errs) {
		case 0:
		case 1:
			return nil, api.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
		default:
			return nil, api.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
		}
		if opts.IncludeObject == "" {
			opts.IncludeObject = metav1.IncludeMetadata
		}
		return &tableOutput{groupVersion: gvk, include: opts.IncludeObject}, nil
	}
	return nil, api.NewStatusError(http.StatusNotAcceptable, "NotAcceptable",
		"only the following media types are accepted: "+strings.Join(servedMediaTypes, ", "))
}

// conversion reads a clause's as/g/v parameters: convert is false for a
// plain clause, gv is the Table's group version, and ok is false for a
// conversion skiff does not make (or a stream other than watch).
func conversion(params map[string]string) (gv string, convert, ok bool) {
	as, g, v := params["as"], params["g"], params["v"]
	if s, has := params["stream"]; has && s != "" && s != "watch" {
		return "", false, false
	}
	if as == "" && g == "" && v == "" {
		return "", false, true
	}
	if as == "Table" && g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") {
		return g + "/" + v, true, true
	}
	return "", false, false
}

// partialObjectMetadata is an object's metadata alone, as meta.k8s.io's
// PartialObjectMetadata.
type partialObjectMetadata struct {
	api.TypeMeta `json:",inline"`
	Metadata     *api.ObjectMeta `json:"metadata"`
}

// buildTable makes the Table of objs (of kind k) at now, with the list's
// resourceVersion rv.
func (t *tableOutput) buildTable(k *api.Kind, objs []api.Object, rv string, now time.Time) (*metav1.Table, error) {
	p := table.For(k)
	if t.printer != nil {
		p = t.printer(k)
	}
	tb := &metav1.Table{
		TypeMeta: metav1.TypeMeta{APIVersion: t.groupVersion, Kind: "Table"},
		ListMeta: metav1.ListMeta{ResourceVersion: rv},
		Rows:     make([]metav1.TableRow, 0, len(objs)),
	}
	if !t.noHeaders {
		tb.ColumnDefinitions = p.Columns
	}
	for _, o := range objs {
		row := metav1.TableRow{Cells: p.Cells(o, now)}
		var embedded any
		switch t.include {
		case metav1.IncludeObject:
			embedded = withTypeMeta(k, o)
		case metav1.IncludeMetadata:
			embedded = partialObjectMetadata{
				TypeMeta: api.TypeMeta{APIVersion: t.groupVersion, Kind: "PartialObjectMetadata"},
				Metadata: o.GetObjectMeta(),
			}
		}
		if embedded != nil {
			b, err := json.Marshal(embedded)
			if err != nil {
				return nil, fmt.Errorf("encode the object of a %s row: %w", k.Kind, err)
			}
			row.Object.Raw = b
		}
		tb.Rows = append(tb.Rows, row)
	}
	return tb, nil
}

// writeTable answers a get or list with the Table of objs.
func (t *tableOutput) writeTable(w http.ResponseWriter, k *api.Kind, objs []api.Object, rv string) {
	tb, err := t.buildTable(k, objs, rv, time.Now())
	if err != nil {
		writeError(w, api.NewInternal(err))
		return
	}
	writeJSON(w, http.StatusOK, tb)
}

// watchObject is the object of one watch event as a Table of one row (the
// first with the column definitions, the later ones without). Error
// events keep their Status, as kube-apiserver; a bookmark becomes a Table
// without rows carrying its resourceVersion.
func (t *tableOutput) watchObject(k *api.Kind, typ api.WatchEventType, o any) (any, error) {
	obj, isObject := o.(api.Object)
	if typ == api.Error || !isObject {
		return o, nil
	}
	var objs []api.Object
	if typ != api.Bookmark {
		objs = []api.Object{obj}
	}
	tb, err := t.buildTable(k, objs, obj.GetObjectMeta().ResourceVersion, time.Now())
	if err != nil {
		return nil, err
	}
	t.noHeaders = true
	return tb, nil
}
