package api

import (
	"embed"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"strings"
)

// The types' own doc comments are the documentation `skiff explain` prints:
// the sources of this package are embedded and parsed at call time, so what
// a student reads is exactly what is next to the field in the code.
//
//go:embed *.go
var sources embed.FS

// typeDocs holds the doc comments of the package's types and their fields.
// +k8s:deepcopy-gen=false
type typeDocs struct {
	types  map[string]string            // type name → doc
	fields map[string]map[string]string // type name → Go field name → doc
}

func loadDocs() (*typeDocs, error) {
	fset := token.NewFileSet()
	entries, err := fs.ReadDir(sources, ".")
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") || strings.HasPrefix(e.Name(), "zz_generated") {
			continue // tests, and the generated deep copies: no docs
		}
		src, err := sources.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, e.Name(), src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", e.Name(), err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "skiff.dev/skiff/api", doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	d := &typeDocs{types: map[string]string{}, fields: map[string]map[string]string{}}
	for _, t := range pkg.Types {
		d.types[t.Name] = withoutTags(t.Doc)
		for _, spec := range t.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok || ts.Name.Name != t.Name {
				continue
			}
			if ts.Doc != nil && d.types[t.Name] == "" {
				d.types[t.Name] = withoutTags(ts.Doc.Text())
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			fd := map[string]string{}
			for _, f := range st.Fields.List {
				text := ""
				if f.Doc != nil {
					text = f.Doc.Text()
				} else if f.Comment != nil {
					text = f.Comment.Text()
				}
				text = withoutTags(text)
				for _, n := range f.Names {
					fd[n.Name] = text
				}
				if len(f.Names) == 0 { // embedded
					fd[embeddedName(f.Type)] = text
				}
			}
			d.fields[t.Name] = fd
		}
	}
	return d, nil
}

// withoutTags drops a doc comment's code generator tags, the lines that
// start with "+" (+k8s:deepcopy-gen: hack/deepcopy.sh), as Kubernetes'
// OpenAPI descriptions and kubectl explain never show them.
func withoutTags(text string) string {
	if !strings.Contains(text, "\n+") && !strings.HasPrefix(text, "+") {
		return text
	}
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "+") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// Explain documents a kind or one of its fields, like `kubectl explain`:
// path is a resource name as kubectl accepts it (pod, deploy, svc...)
// followed by json field names: "pod.spec.containers".
func Explain(path string) (string, error) {
	parts := strings.Split(path, ".")
	k, err := LookupResource(parts[0])
	if err != nil {
		return "", err
	}
	docs, err := loadDocs()
	if err != nil {
		return "", fmt.Errorf("explain: read the type docs: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "KIND:       %s\n", k.Kind)
	if k.Group != "" {
		fmt.Fprintf(&b, "GROUP:      %s\n", k.Group)
	}
	fmt.Fprintf(&b, "VERSION:    %s\n\n", k.Version)

	t := k.Type
	desc := docs.types[t.Name()]
	var field *jsonField
	for i, name := range parts[1:] {
		st := structOf(t)
		if st == nil {
			return "", fmt.Errorf("field %q does not exist (%s has no fields)", strings.Join(parts[1:i+2], "."), typeLabel(t))
		}
		var found *jsonField
		for _, f := range jsonFields(st) {
			if f.Name == name {
				found = &f
				break
			}
		}
		if found == nil {
			return "", fmt.Errorf("field %q does not exist", strings.Join(parts[1:i+2], "."))
		}
		field = found
		t = found.Type
		desc = (&Docs{d: docs}).Field(*found)
	}
	if field != nil {
		fmt.Fprintf(&b, "FIELD: %s <%s>%s\n\n", field.Name, typeLabel(field.Type), required(*field))
	}
	b.WriteString("DESCRIPTION:\n")
	writeText(&b, desc, "    ")
	if field != nil {
		if td := docs.types[structName(t)]; td != "" && td != desc {
			b.WriteString("\n")
			writeText(&b, td, "    ")
		}
	}
	if st := structOf(t); st != nil {
		b.WriteString("\nFIELDS:\n")
		for _, f := range jsonFields(st) {
			fmt.Fprintf(&b, "  %s\t<%s>%s\n", f.Name, typeLabel(f.Type), required(f))
			writeText(&b, docs.fields[f.Owner.Name()][f.GoName], "    ")
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

func required(f jsonField) string {
	if f.Required() {
		return " -required-"
	}
	return ""
}

// Docs are the doc comments of the API types and their fields, as `skiff
// explain` prints them; the OpenAPI schemas carry the same text.
// +k8s:deepcopy-gen=false
type Docs struct{ d *typeDocs }

// LoadDocs parses the package's embedded sources for their doc comments.
func LoadDocs() (*Docs, error) {
	d, err := loadDocs()
	if err != nil {
		return nil, fmt.Errorf("read the type docs: %w", err)
	}
	return &Docs{d: d}, nil
}

// Type is the doc comment of the named type of this package.
func (d *Docs) Type(name string) string { return strings.TrimSpace(d.d.types[name]) }

// Field is the doc comment of field f, or when it has none the doc comment
// of the struct it holds, as explain shows it.
func (d *Docs) Field(f Field) string {
	if desc := d.d.fields[f.Owner.Name()][f.GoName]; desc != "" {
		return strings.TrimSpace(desc)
	}
	return d.Type(structName(f.Type))
}

// structOf returns the struct type reached through pointers, slices and
// maps, or nil for a leaf (string, Quantity, Time...).
func structOf(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			t = t.Elem()
			continue
		case reflect.Struct:
			if isLeafType(t) {
				return nil
			}
			return t
		}
		return nil
	}
}

func structName(t reflect.Type) string {
	if st := structOf(t); st != nil {
		return st.Name()
	}
	return ""
}

func isLeafType(t reflect.Type) bool {
	switch t {
	case quantityType, intOrStringType, timeType, microTimeType:
		return true
	}
	return false
}

// typeLabel names a type as kubectl explain does: string, integer,
// boolean, Object names, []X, map[string]X.
func typeLabel(t reflect.Type) string {
	switch t {
	case quantityType:
		return "Quantity"
	case intOrStringType:
		return "IntOrString"
	case timeType, microTimeType:
		return "string"
	case rawMessageType:
		return "Object"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeLabel(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "[]" + typeLabel(t.Elem())
	case reflect.Map:
		return "map[string]" + typeLabel(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Interface:
		return "Object"
	case reflect.Struct:
		return t.Name()
	}
	return t.String()
}

// writeText writes a doc comment re-wrapped at 80 columns with indent.
func writeText(b *strings.Builder, text, indent string) {
	text = strings.TrimSpace(text)
	if text == "" {
		b.WriteString(indent + "<no description>\n")
		return
	}
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			b.WriteString("\n")
		}
		line := indent
		for _, w := range strings.Fields(para) {
			if len(line) > len(indent) && len(line)+1+len(w) > 80 {
				b.WriteString(line + "\n")
				line = indent
			}
			if len(line) > len(indent) {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
}
