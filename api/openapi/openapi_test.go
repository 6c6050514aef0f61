package openapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"skiff.dev/skiff/api"
)

func build(t *testing.T) *Documents {
	t.Helper()
	d, err := Build(api.Kinds, "v1.32.0-skiff")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func gvOf(k *api.Kind) string {
	if k.Group == "" {
		return "api/" + k.Version
	}
	return "apis/" + k.Group + "/" + k.Version
}

// kindSchema finds the definition carrying k's GVK.
func kindSchema(defs map[string]spec.Schema, k *api.Kind) (string, *spec.Schema) {
	for name, s := range defs {
		var gvks []map[string]string
		if err := s.Extensions.GetObject(extGVK, &gvks); err != nil {
			continue
		}
		for _, g := range gvks {
			if g["group"] == k.Group && g["version"] == k.Version && g["kind"] == k.Kind {
				return name, &s
			}
		}
	}
	return "", nil
}

func v3Defs(doc *spec3.OpenAPI) map[string]spec.Schema {
	out := map[string]spec.Schema{}
	for n, s := range doc.Components.Schemas {
		out[n] = *s
	}
	return out
}

// Every kind has a schema with its GVK, in v2 and in its group version's
// v3 document, and a PATCH operation that names fieldValidation (what
// kubectl checks before it leaves validation to the server) and the patch
// types skiff accepts.
func TestEveryKindHasItsSchema(t *testing.T) {
	d := build(t)
	for _, k := range api.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			if name, s := kindSchema(d.V2.Definitions, k); s == nil {
				t.Errorf("v2: no definition with GVK %s", k.GroupKind())
			} else if !strings.HasSuffix(name, "."+k.Kind) {
				t.Errorf("v2: %s named %s", k.Kind, name)
			}
			doc := d.V3[gvOf(k)]
			if doc == nil {
				t.Fatalf("v3: no document %s", gvOf(k))
			}
			if _, s := kindSchema(v3Defs(doc), k); s == nil {
				t.Errorf("v3 %s: no schema with GVK %s", gvOf(k), k.GroupKind())
			}
			if k.Internal {
				return
			}
			var patches int
			for path, p := range doc.Paths.Paths {
				if p.Patch == nil || strings.HasSuffix(path, "/scale") {
					continue
				}
				var g map[string]string
				if err := p.Patch.Extensions.GetObject(extGVK, &g); err != nil || g["kind"] != k.Kind || g["group"] != k.Group {
					continue
				}
				patches++
				var hasFV bool
				for _, prm := range p.Patch.Parameters {
					hasFV = hasFV || (prm.Name == "fieldValidation" && prm.In == "query")
				}
				if !hasFV {
					t.Errorf("PATCH %s: no fieldValidation query parameter", path)
				}
				if _, ok := p.Patch.RequestBody.Content["application/merge-patch+json"]; !ok {
					t.Errorf("PATCH %s: no merge patch body", path)
				}
			}
			if patches == 0 {
				t.Errorf("v3 %s: no PATCH operation for %s", gvOf(k), k.Kind)
			}
		})
	}
}

// The definitions made from skiff's types list exactly their JSON fields:
// a Kubernetes field skiff does not implement is not there, so kubectl's
// validation calls it unknown.
func TestSchemasListExactlySkiffsFields(t *testing.T) {
	docs, err := api.LoadDocs()
	if err != nil {
		t.Fatal(err)
	}
	for _, v3 := range []bool{false, true} {
		b := &builder{v3: v3, docs: docs, defs: map[string]*definition{}}
		operations(b, api.Kinds)
		if b.err != nil {
			t.Fatal(b.err)
		}
		for name, def := range b.defs {
			if def.from == nil || isLeaf(def.from) || leafCounterparts[def.from] != nil {
				continue
			}
			var want []string
			for _, f := range api.Fields(def.from) {
				want = append(want, f.Name)
			}
			var got []string
			for p := range def.schema.Properties {
				got = append(got, p)
			}
			sort.Strings(want)
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("v3=%v %s (from %v): properties %v, want %v", v3, name, def.from, got, want)
			}
		}
	}
	d := build(t)
	podSpec := d.V2.Definitions["io.k8s.api.core.v1.PodSpec"]
	for _, absent := range []string{"imagePullSecrets", "hostPID"} {
		if _, ok := podSpec.Properties[absent]; ok {
			t.Errorf("PodSpec lists %s, which skiff does not implement", absent)
		}
	}
}

// The strategic merge metadata is Kubernetes': kubectl's own lookup
// (strategicpatch.PatchMetaFromOpenAPIV3, what `kubectl apply` uses) reads
// the merge keys and strategies from the v3 document.
func TestMergeKeysAsKubectlReadsThem(t *testing.T) {
	d := build(t)
	tests := []struct {
		gv, kind string
		path     []string // struct fields, then the list
		key      string
		strategy []string
	}{
		{"apis/apps/v1", "io.k8s.api.apps.v1.Deployment", []string{"spec", "template", "spec", "containers"}, "name", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"spec", "containers"}, "name", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"spec", "initContainers"}, "name", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"spec", "volumes"}, "name", []string{"merge", "retainKeys"}},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"spec", "tolerations"}, "", nil},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"metadata", "finalizers"}, "", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Pod", []string{"metadata", "ownerReferences"}, "uid", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Service", []string{"spec", "ports"}, "port", []string{"merge"}},
		{"api/v1", "io.k8s.api.core.v1.Node", []string{"spec", "taints"}, "", nil},
		{"api/v1", "io.k8s.api.core.v1.Node", []string{"status", "conditions"}, "type", []string{"merge"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"."+strings.Join(tt.path, "."), func(t *testing.T) {
			schemas := d.V3[tt.gv].Components.Schemas
			var meta strategicpatch.LookupPatchMeta = strategicpatch.PatchMetaFromOpenAPIV3{Schema: schemas[tt.kind], SchemaList: schemas}
			for _, f := range tt.path[:len(tt.path)-1] {
				next, _, err := meta.LookupPatchMetadataForStruct(f)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				meta = next
			}
			_, pm, err := meta.LookupPatchMetadataForSlice(tt.path[len(tt.path)-1])
			if err != nil {
				t.Fatal(err)
			}
			if pm.GetPatchMergeKey() != tt.key || !slices.Equal(pm.GetPatchStrategies(), tt.strategy) {
				t.Errorf("merge key %q strategies %v, want %q %v", pm.GetPatchMergeKey(), pm.GetPatchStrategies(), tt.key, tt.strategy)
			}
		})
	}
	// The pod's containers' ports and env merge too.
	schemas := d.V3["api/v1"].Components.Schemas
	c := schemas["io.k8s.api.core.v1.Container"]
	for field, key := range map[string]string{"ports": "containerPort", "env": "name", "volumeMounts": "mountPath"} {
		if got := c.Properties[field].Extensions[extMergeKey]; got != key {
			t.Errorf("Container.%s merge key %v, want %s", field, got, key)
		}
	}
	if got := d.V3["apis/apps/v1"].Components.Schemas["io.k8s.api.apps.v1.DeploymentSpec"]; got == nil {
		t.Fatal("no DeploymentSpec in apps/v1")
	} else if s := got.Properties["strategy"].Extensions[extStrategy]; s != "retainKeys" {
		t.Errorf("DeploymentSpec.strategy patch strategy %v, want retainKeys", s)
	}
}

// Quantities and IntOrStrings are described as Kubernetes describes them.
func TestLeafTypes(t *testing.T) {
	d := build(t)
	v3 := d.V3["api/v1"].Components.Schemas
	tests := []struct {
		name      string
		v2Type    []string
		v3OneOf   []string
		format    string
		container string // a field of Container holding it, through a $ref
	}{
		{"io.k8s.apimachinery.pkg.api.resource.Quantity", []string{"string"}, []string{"string", "number"}, "", ""},
		{"io.k8s.apimachinery.pkg.util.intstr.IntOrString", []string{"string"}, []string{"integer", "string"}, "int-or-string", ""},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.Time", []string{"string"}, nil, "date-time", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s2, ok := d.V2.Definitions[tt.name]
			if !ok {
				t.Fatal("not in v2")
			}
			if !slices.Equal([]string(s2.Type), tt.v2Type) || s2.Format != tt.format {
				t.Errorf("v2: type %v format %q, want %v %q", s2.Type, s2.Format, tt.v2Type, tt.format)
			}
			s3 := v3[tt.name]
			if s3 == nil {
				t.Fatal("not in v3 api/v1")
			}
			var oneOf []string
			for _, o := range s3.OneOf {
				oneOf = append(oneOf, o.Type...)
			}
			want := tt.v3OneOf
			if want == nil {
				want = nil
				if !slices.Equal([]string(s3.Type), tt.v2Type) {
					t.Errorf("v3: type %v, want %v", s3.Type, tt.v2Type)
				}
			}
			if !slices.Equal(oneOf, want) || s3.Format != tt.format {
				t.Errorf("v3: oneOf %v format %q, want %v %q", oneOf, s3.Format, want, tt.format)
			}
		})
	}
	rr := v3["io.k8s.api.core.v1.ResourceRequirements"]
	limits := rr.Properties["limits"]
	if limits.AdditionalProperties == nil || limits.AdditionalProperties.Schema.Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity" {
		t.Errorf("ResourceRequirements.limits is not a map of Quantity: %+v", limits)
	}
}

// Every list-type marker of the table lands on a list of a definition that
// exists; a type renamed in skiff or Kubernetes fails here, not silently.
func TestListTypesTableIsUsed(t *testing.T) {
	d := build(t)
	for key, lt := range listTypes {
		i := strings.LastIndex(key, ".")
		def, field := key[:i], key[i+1:]
		s, ok := d.V2.Definitions[def]
		if !ok {
			t.Errorf("%s: no definition %s", key, def)
			continue
		}
		p, ok := s.Properties[field]
		if !ok {
			t.Errorf("%s: %s has no field %s", key, def, field)
			continue
		}
		if !slices.Equal([]string(p.Type), []string{"array"}) {
			t.Errorf("%s: not a list", key)
		}
		if p.Extensions[extListType] != lt.Type {
			t.Errorf("%s: list type %v, want %s", key, p.Extensions[extListType], lt.Type)
		}
	}
}

// Each v3 document stands alone: every $ref names one of its own schemas.
func TestV3DocumentsAreSelfContained(t *testing.T) {
	d := build(t)
	for gv, doc := range d.V3 {
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var tree any
		if err := json.Unmarshal(b, &tree); err != nil {
			t.Fatal(err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				if r, ok := x["$ref"].(string); ok {
					name := strings.TrimPrefix(r, "#/components/schemas/")
					if _, ok := doc.Components.Schemas[name]; !ok || name == r {
						t.Errorf("%s: dangling $ref %s", gv, r)
					}
				}
				for _, c := range x {
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		walk(tree)
	}
}

// Descriptions are the doc comments `skiff explain` prints, one source.
func TestDescriptionsAreTheTypeDocs(t *testing.T) {
	docs, err := api.LoadDocs()
	if err != nil {
		t.Fatal(err)
	}
	d := build(t)
	spec := d.V3["apis/apps/v1"].Components.Schemas["io.k8s.api.apps.v1.DeploymentSpec"]
	var replicas api.Field
	for _, f := range api.Fields(reflect.TypeFor[api.DeploymentSpec]()) {
		if f.Name == "replicas" {
			replicas = f
		}
	}
	want := describe(docs.Field(replicas))
	if want == "" || spec.Properties["replicas"].Description != want {
		t.Errorf("replicas description %q, want the doc comment %q", spec.Properties["replicas"].Description, want)
	}
	if !slices.Contains(d.V2.Definitions["io.k8s.api.core.v1.Container"].Required, "name") {
		t.Error("Container.name is not required")
	}
}

// The list-type table says what Kubernetes' sources say: each list of a
// definition named after a Kubernetes type has the +listType and
// +listMapKey markers of that type's field in k8s.io/api or
// k8s.io/apimachinery (read from the module cache), and no others.
func TestListTypesMatchKubernetesSources(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}", "k8s.io/api", "k8s.io/apimachinery").Output()
	if err != nil {
		t.Skipf("no module sources: %v", err)
	}
	modDirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		modDirs[path] = dir
	}
	// markers[definition name][json field] = "type keys..."
	markers := map[string]map[string]string{}
	readPackage := func(prefix, dir string) {
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return false
				}
				m := map[string]string{}
				for _, field := range st.Fields.List {
					if field.Tag == nil || field.Doc == nil {
						continue
					}
					tag := reflect.StructTag(strings.Trim(field.Tag.Value, "`"))
					name, _, _ := strings.Cut(tag.Get("json"), ",")
					var lt, keys []string
					for _, c := range field.Doc.List {
						if v, ok := strings.CutPrefix(c.Text, "// +listType="); ok {
							lt = append(lt, v)
						}
						if v, ok := strings.CutPrefix(c.Text, "// +listMapKey="); ok {
							keys = append(keys, v)
						}
					}
					if len(lt) > 0 {
						m[name] = strings.Join(append(lt, keys...), " ")
					}
				}
				markers[prefix+ts.Name.Name] = m
				return false
			})
		}
	}
	pkgs := map[string]string{
		"io.k8s.apimachinery.pkg.apis.meta.v1.": filepath.Join(modDirs["k8s.io/apimachinery"], "pkg/apis/meta/v1"),
	}
	for _, gv := range []string{"core/v1", "apps/v1", "scheduling/v1", "autoscaling/v1", "autoscaling/v2", "coordination/v1", "discovery/v1"} {
		pkgs["io.k8s.api."+strings.ReplaceAll(gv, "/", ".")+"."] = filepath.Join(modDirs["k8s.io/api"], gv)
	}
	for prefix, dir := range pkgs {
		readPackage(prefix, dir)
	}
	if markers["io.k8s.api.core.v1.PodSpec"]["containers"] != "map name" {
		t.Fatalf("did not read Kubernetes' sources: PodSpec.containers markers %q", markers["io.k8s.api.core.v1.PodSpec"]["containers"])
	}
	d := build(t)
	for name, s := range d.V2.Definitions {
		src, ok := markers[name]
		if !ok {
			continue // not a Kubernetes type (or a List)
		}
		for field, p := range s.Properties {
			var got []string
			if lt, ok := p.Extensions[extListType].(string); ok {
				got = append(got, lt)
				if keys, ok := p.Extensions[extListMapKeys].([]string); ok {
					got = append(got, keys...)
				}
			}
			if g, w := strings.Join(got, " "), src[field]; g != w {
				t.Errorf("%s.%s: list type %q, Kubernetes' source says %q", name, field, g, w)
			}
		}
	}
}
