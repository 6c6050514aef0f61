package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api"
)

// outputFormat is a parsed -o flag.
type outputFormat struct {
	// Format: "" (table), wide, json, yaml, name, jsonpath.
	Format string
	// Template of jsonpath.
	Template string
}

// parseOutput reads -o: wide|yaml|json|name|jsonpath=TEMPLATE.
func parseOutput(s string) (outputFormat, error) {
	name, tmpl, hasTmpl := strings.Cut(s, "=")
	switch name {
	case "", "wide", "json", "yaml", "name":
		if hasTmpl {
			break
		}
		return outputFormat{Format: name}, nil
	case "jsonpath":
		tmpl = strings.TrimSpace(tmpl)
		if len(tmpl) >= 2 && (tmpl[0] == '\'' || tmpl[0] == '"') && tmpl[len(tmpl)-1] == tmpl[0] {
			tmpl = tmpl[1 : len(tmpl)-1]
		}
		if tmpl == "" {
			return outputFormat{}, fmt.Errorf("template format specified but no template given")
		}
		if _, err := newJSONPath(tmpl); err != nil {
			return outputFormat{}, err
		}
		return outputFormat{Format: "jsonpath", Template: tmpl}, nil
	}
	return outputFormat{}, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,jsonpath,name,wide,yaml", s)
}

// structured reports formats that print whole objects, not tables.
func (f outputFormat) structured() bool {
	return f.Format == "json" || f.Format == "yaml" || f.Format == "jsonpath"
}

func newJSONPath(tmpl string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("out").AllowMissingKeys(true)
	if err := j.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("error parsing jsonpath %s: %w", tmpl, err)
	}
	return j, nil
}

// withTypeMeta fills apiVersion and kind, which servers may leave out of list items.
func withTypeMeta(obj api.Object) api.Object {
	if obj.GetTypeMeta().Kind == "" {
		api.SetTypeMeta(obj)
	}
	return obj
}

// listJSON is kubectl's List wrapper for several objects.
func listJSON(objs []api.Object) ([]byte, error) {
	items := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		b, err := json.Marshal(withTypeMeta(o))
		if err != nil {
			return nil, err
		}
		items = append(items, b)
	}
	return json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]string{"resourceVersion": ""},
	})
}

// printStructured prints objs as json, yaml, name or jsonpath. single
// means one object was asked for by name: it prints bare, not in a List.
func printStructured(w io.Writer, objs []api.Object, single bool, f outputFormat) error {
	if f.Format == "name" {
		for _, o := range objs {
			fmt.Fprintln(w, objectRef(kindOf(o), o.GetObjectMeta().Name))
		}
		return nil
	}
	var data []byte
	var err error
	if single && len(objs) == 1 {
		data, err = json.Marshal(withTypeMeta(objs[0]))
	} else {
		data, err = listJSON(objs)
	}
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return printJSONAs(w, data, f)
}

// printJSONAs prints one JSON document in format f (json, yaml, jsonpath).
func printJSONAs(w io.Writer, data []byte, f outputFormat) error {
	switch f.Format {
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "    "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	case "yaml":
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	case "jsonpath":
		j, err := newJSONPath(f.Template)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		if err := j.Execute(w, v); err != nil {
			return fmt.Errorf("error executing jsonpath %q: %w", f.Template, err)
		}
		return nil
	}
	return fmt.Errorf("unknown output format %q", f.Format)
}
