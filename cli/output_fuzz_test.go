package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

// errOutputFull stops a printer that prints more than limitWriter takes.
var errOutputFull = errors.New("output full")

// limitWriter takes n bytes, then fails: a template's output is bounded.
type limitWriter struct {
	bytes.Buffer
	n int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.n {
		return 0, errOutputFull
	}
	return w.Buffer.Write(p)
}

// fuzzOutputDocs are the JSON documents -o prints: every object of
// examples/ alone, and all of them in a List.
func fuzzOutputDocs(f *testing.F) [][]byte {
	files, _ := filepath.Glob("../examples/*.yaml")
	var objs []api.Object
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range api.DecodeStream(data) {
			if d.Err == nil {
				objs = append(objs, d.Object)
			}
		}
	}
	var docs [][]byte
	for _, o := range objs {
		b, err := json.Marshal(withTypeMeta(o))
		if err != nil {
			f.Fatal(err)
		}
		docs = append(docs, b)
	}
	list, err := listJSON(objs)
	if err != nil {
		f.Fatal(err)
	}
	return append(docs, list)
}

// FuzzOutputJSONPath: any -o value is refused with an error or accepted;
// an accepted jsonpath template prints any object (or fails with an error)
// the same way twice (wildcards over maps: the same bytes in any order),
// and a template that names a field prints it.
func FuzzOutputJSONPath(f *testing.F) {
	for _, s := range []string{
		"jsonpath={.items[0].metadata.name}", "jsonpath='{.metadata.name}'", `jsonpath="{.kind}"`,
		`jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}`,
		"jsonpath={.items[?(@.kind==\"Pod\")].spec.containers[*].resources.limits.nvidia\\.com/gpu}",
		"jsonpath={..image}", "jsonpath={.items[-1:]}", "jsonpath={.items[0:2:0]}", "jsonpath={.metadata.labels['app']}",
		"jsonpath={", "jsonpath={range .items[*]}", "jsonpath=", "jsonpath={.a}{end}", "jsonpath={.items[999999999]}",
		"json", "yaml", "wide", "name", "json=x", "table",
	} {
		f.Add(s, uint8(0))
	}
	docs := fuzzOutputDocs(f)
	f.Fuzz(func(t *testing.T, s string, which uint8) {
		if len(s) > 1<<10 {
			t.Skip("input too large")
		}
		of, err := parseOutput(s)
		if err != nil || of.Format != "jsonpath" {
			return
		}
		doc := docs[int(which)%len(docs)]
		w1, w2 := &limitWriter{n: 1 << 20}, &limitWriter{n: 1 << 20}
		err1 := printJSONAs(w1, doc, of)
		err2 := printJSONAs(w2, doc, of)
		same := w1.String() == w2.String()
		if strings.Contains(of.Template, "*") || strings.Contains(of.Template, "..") {
			// client-go walks a map's wildcard in Go's random map order,
			// as in kubectl: the same values, in any order.
			same = w1.Len() == w2.Len()
		}
		if (err1 == nil) != (err2 == nil) || !same {
			t.Fatalf("%q printed differently twice: %q (%v), %q (%v)", s, w1.String(), err1, w2.String(), err2)
		}
		if of.Template == "{.kind}" && err1 == nil {
			var head struct{ Kind string }
			_ = json.Unmarshal(doc, &head)
			if w1.String() != head.Kind {
				t.Fatalf("{.kind} printed %q, want %q", w1.String(), head.Kind)
			}
		}
	})
}
