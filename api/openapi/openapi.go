package openapi

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// Documents are the OpenAPI documents of the API.
type Documents struct {
	// V2 is the Swagger 2.0 document served at /openapi/v2.
	V2 *spec.Swagger
	// V3 holds one OpenAPI 3.0 document per group version, by the path it
	// is served under after /openapi/v3/: "api/v1", "apis/apps/v1".
	V3 map[string]*spec3.OpenAPI
}

const patchModel = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"

// Build makes the documents of kinds (api.Kinds) and version (the
// server's version, for info.version). It fails only on a type it cannot
// describe, which a unit test catches.
func Build(kinds []*api.Kind, version string) (*Documents, error) {
	docs, err := api.LoadDocs()
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	info := &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version,
		Description: "skiff: the fields skiff implements of the Kubernetes API"}}

	v2 := &builder{docs: docs, defs: map[string]*definition{}}
	ops2 := operations(v2, kinds)
	if v2.err != nil {
		return nil, fmt.Errorf("openapi v2: %w", v2.err)
	}
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        info,
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
	for name, d := range v2.defs {
		sw.Definitions[name] = d.schema
	}
	for _, op := range ops2 {
		item := sw.Paths.Paths[op.path]
		setOperationV2(&item, op)
		sw.Paths.Paths[op.path] = item
	}

	v3 := &builder{v3: true, docs: docs, defs: map[string]*definition{}}
	ops3 := operations(v3, kinds)
	if v3.err != nil {
		return nil, fmt.Errorf("openapi v3: %w", v3.err)
	}
	out := &Documents{V2: sw, V3: map[string]*spec3.OpenAPI{}}
	roots := map[string][]string{}
	for _, op := range ops3 {
		doc := out.V3[op.gv]
		if doc == nil {
			doc = &spec3.OpenAPI{Version: "3.0.0", Info: info,
				Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
				Components: &spec3.Components{Schemas: map[string]*spec.Schema{}}}
			out.V3[op.gv] = doc
		}
		p := doc.Paths.Paths[op.path]
		if p == nil {
			p = &spec3.Path{}
			doc.Paths.Paths[op.path] = p
		}
		setOperationV3(p, op)
		roots[op.gv] = append(roots[op.gv], op.models()...)
	}
	for gv, doc := range out.V3 {
		for _, name := range v3.closure(roots[gv]...) {
			s := v3.defs[name].schema
			doc.Components.Schemas[name] = &s
		}
	}
	return out, nil
}

// operation is one method on one path, for either version.
type operation struct {
	gv     string // "api/v1"
	path   string // "/api/v1/namespaces/{namespace}/pods/{name}"
	method string
	id     string
	action string // x-kubernetes-action: list, post, get, put, patch, delete
	gvk    map[string]string
	// body and response name definitions ("" for none).
	body, response string
	// consumes lists the media types of the body (patches: the patch types).
	consumes []string
	params   []param
	ref      func(string) spec.Ref
}

func (o operation) models() []string {
	var out []string
	for _, m := range []string{o.body, o.response} {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// param is a query or path parameter.
type param struct {
	name, in, typ, desc string
}

// The parameters of kube-apiserver's operations that skiff implements.
var (
	pName      = param{"name", "path", "string", "name of the object"}
	pNamespace = param{"namespace", "path", "string", "object name and auth scope, such as for teams and projects"}
	pPretty    = param{"pretty", "query", "string", "If 'true', then the output is pretty printed."}
	pDryRun    = param{"dryRun", "query", "string", "When present, indicates that modifications should not be persisted. The only valid value is All."}
	pManager   = param{"fieldManager", "query", "string", "fieldManager is a name associated with the actor or entity that is making these changes."}
	pFieldVal  = param{"fieldValidation", "query", "string",
		"fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: drops unknown fields and keeps the last of duplicate fields. - Warn: as Ignore, with a warning for each (the standard Warning header). - Strict: fails the request on unknown or duplicate fields (skiff's default). A field Kubernetes has that skiff does not implement is refused in every mode."}
	pForce     = param{"force", "query", "boolean", "Force is going to \"force\" Apply requests."}
	pLabelSel  = param{"labelSelector", "query", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."}
	pFieldSel  = param{"fieldSelector", "query", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."}
	pRV        = param{"resourceVersion", "query", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."}
	pRVMatch   = param{"resourceVersionMatch", "query", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."}
	pTimeout   = param{"timeoutSeconds", "query", "integer", "Timeout for the list/watch call."}
	pWatch     = param{"watch", "query", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."}
	pGrace     = param{"gracePeriodSeconds", "query", "integer", "The duration in seconds before the object should be deleted."}
	pPropagate = param{"propagationPolicy", "query", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground."}

	listParams   = []param{pLabelSel, pFieldSel, pRV, pRVMatch, pTimeout, pWatch}
	writeParams  = []param{pDryRun, pManager, pFieldVal}
	patchParams  = []param{pDryRun, pManager, pFieldVal, pForce}
	deleteParams = []param{pDryRun, pGrace, pPropagate}
)

// operations lists every operation of kinds, making their definitions in b.
func operations(b *builder, kinds []*api.Kind) []operation {
	status := b.namedDefinition(reflect.TypeFor[api.Status](), reflect.TypeFor[metav1.Status](), "", "v1", "Status")
	deleteOpts := b.namedDefinition(reflect.TypeFor[api.DeleteOptions](), reflect.TypeFor[metav1.DeleteOptions](), "", "", "")
	b.defs[patchModel] = &definition{schema: spec.Schema{SchemaProps: spec.SchemaProps{
		Description: "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
		Type:        spec.StringOrArray{"object"}}}}
	var scale string
	var ops []operation
	for _, k := range kinds {
		object, list := b.kindDefinition(k)
		gv, prefix := "api/"+k.Version, "/api/"+k.Version
		if k.Group != "" {
			gv, prefix = "apis/"+k.Group+"/"+k.Version, "/apis/"+k.Group+"/"+k.Version
		}
		g := gvk(k.Group, k.Version, k.Kind)
		id := func(verb, suffix string) string {
			return verb + groupID(k.Group) + strings.ToUpper(k.Version[:1]) + k.Version[1:] + suffix
		}
		scope, named := "", ""
		collection := prefix + "/" + k.Resource
		if k.Namespaced {
			scope = "Namespaced"
			collection = prefix + "/namespaces/{namespace}/" + k.Resource
		}
		one := collection + "/{name}"
		base := []param{pPretty}
		if k.Namespaced {
			base = []param{pNamespace, pPretty}
		}
		named = scope + k.Kind
		add := func(o operation) {
			o.gv, o.ref = gv, b.ref
			if o.gvk == nil {
				o.gvk = g
			}
			ops = append(ops, o)
		}
		add(operation{path: collection, method: http.MethodGet, id: id("list", named), action: "list", response: list, params: append(base, listParams...)})
		if k.Namespaced {
			add(operation{path: prefix + "/" + k.Resource, method: http.MethodGet, id: id("list", k.Kind+"ForAllNamespaces"), action: "list", response: list, params: append([]param{pPretty}, listParams...)})
		}
		add(operation{path: one, method: http.MethodGet, id: id("read", named), action: "get", response: object, params: append([]param{pName}, base...)})
		if k.Internal {
			continue // read-only
		}
		add(operation{path: collection, method: http.MethodPost, id: id("create", named), action: "post", body: object, response: object, params: append(base, writeParams...)})
		add(operation{path: one, method: http.MethodPut, id: id("replace", named), action: "put", body: object, response: object, params: append([]param{pName}, append(base, writeParams...)...)})
		add(operation{path: one, method: http.MethodPatch, id: id("patch", named), action: "patch", body: patchModel, response: object,
			consumes: patchTypes(k.APIVersion(), k.Kind), params: append([]param{pName}, append(base, patchParams...)...)})
		add(operation{path: one, method: http.MethodDelete, id: id("delete", named), action: "delete", body: deleteOpts, response: status, params: append([]param{pName}, append(base, deleteParams...)...)})
		if k.HasStatus {
			sub := one + "/status"
			add(operation{path: sub, method: http.MethodGet, id: id("read", named+"Status"), action: "get", response: object, params: append([]param{pName}, base...)})
			add(operation{path: sub, method: http.MethodPut, id: id("replace", named+"Status"), action: "put", body: object, response: object, params: append([]param{pName}, append(base, writeParams...)...)})
			add(operation{path: sub, method: http.MethodPatch, id: id("patch", named+"Status"), action: "patch", body: patchModel, response: object,
				consumes: patchTypes(k.APIVersion(), k.Kind), params: append([]param{pName}, append(base, patchParams...)...)})
		}
		if k.HasScale { // the scale subresource (apiserver knownSub)
			if scale == "" {
				kt, _ := patch.KubernetesType("autoscaling/v1", "Scale")
				if kt == nil {
					kt = reflect.TypeFor[autoscalingv1.Scale]()
				}
				scale = b.namedDefinition(reflect.TypeFor[api.Scale](), kt, "autoscaling", "v1", "Scale")
			}
			sg := gvk("autoscaling", "v1", "Scale")
			sub := one + "/scale"
			add(operation{path: sub, method: http.MethodGet, id: id("read", named+"Scale"), action: "get", gvk: sg, response: scale, params: append([]param{pName}, base...)})
			add(operation{path: sub, method: http.MethodPut, id: id("replace", named+"Scale"), action: "put", gvk: sg, body: scale, response: scale, params: append([]param{pName}, append(base, writeParams...)...)})
			add(operation{path: sub, method: http.MethodPatch, id: id("patch", named+"Scale"), action: "patch", gvk: sg, body: patchModel, response: scale,
				consumes: patchTypes("autoscaling/v1", "Scale"), params: append([]param{pName}, append(base, patchParams...)...)})
		}
	}
	for i := range ops {
		ops[i].params = append([]param(nil), ops[i].params...) // no shared backing arrays
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].path < ops[j].path })
	return ops
}

// patchTypes are the patch media types PATCH accepts for apiVersion/kind.
func patchTypes(apiVersion, kind string) []string {
	var out []string
	for _, t := range patch.Supported(apiVersion, kind) {
		out = append(out, string(t))
	}
	return out
}

// groupID is the group as kube-apiserver's operation IDs spell it:
// "" → Core, "apps" → Apps, "scheduling.k8s.io" → Scheduling.
func groupID(group string) string {
	if group == "" {
		return "Core"
	}
	first, _, _ := strings.Cut(group, ".")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(first, func(r rune) bool { return r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func (p param) schema() *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{p.typ}, UniqueItems: true}}
}

// setOperationV3 puts op on its path.
func setOperationV3(p *spec3.Path, op operation) {
	o := &spec3.Operation{OperationProps: spec3.OperationProps{
		OperationId: op.id,
		Tags:        []string{op.gv},
		Responses:   &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}},
	}}
	o.AddExtension(extAction, op.action)
	o.AddExtension(extGVK, op.gvk)
	for _, prm := range op.params {
		o.Parameters = append(o.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
			Name: prm.name, In: prm.in, Description: prm.desc, Required: prm.in == "path", Schema: prm.schema()}})
	}
	if op.body != "" {
		types := op.consumes
		if len(types) == 0 {
			types = []string{"*/*"}
		}
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Required: op.action != "delete", Content: map[string]*spec3.MediaType{}}}
		for _, t := range types {
			o.RequestBody.Content[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: op.ref(op.body)}}}}
		}
	}
	if op.response != "" {
		resp := func(desc string) *spec3.Response {
			return &spec3.Response{ResponseProps: spec3.ResponseProps{Description: desc, Content: map[string]*spec3.MediaType{
				"application/json": {MediaTypeProps: spec3.MediaTypeProps{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: op.ref(op.response)}}}},
				"application/yaml": {MediaTypeProps: spec3.MediaTypeProps{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: op.ref(op.response)}}}},
			}}}
		}
		o.Responses.StatusCodeResponses[http.StatusOK] = resp("OK")
		switch op.action {
		case "post":
			o.Responses.StatusCodeResponses[http.StatusCreated] = resp("Created")
		case "delete":
			o.Responses.StatusCodeResponses[http.StatusAccepted] = resp("Accepted")
		}
	}
	o.Responses.StatusCodeResponses[http.StatusUnauthorized] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}
	switch op.method {
	case http.MethodGet:
		p.Get = o
	case http.MethodPost:
		p.Post = o
	case http.MethodPut:
		p.Put = o
	case http.MethodPatch:
		p.Patch = o
	case http.MethodDelete:
		p.Delete = o
	}
}

// setOperationV2 puts op on its path item.
func setOperationV2(item *spec.PathItem, op operation) {
	o := &spec.Operation{OperationProps: spec.OperationProps{
		ID:        op.id,
		Tags:      []string{op.gv},
		Consumes:  op.consumes,
		Produces:  []string{"application/json", "application/yaml"},
		Schemes:   []string{"https"},
		Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{}}},
	}}
	if len(o.Consumes) == 0 {
		o.Consumes = []string{"*/*"}
	}
	o.AddExtension(extAction, op.action)
	o.AddExtension(extGVK, op.gvk)
	for _, prm := range op.params {
		o.Parameters = append(o.Parameters, spec.Parameter{
			SimpleSchema:      spec.SimpleSchema{Type: prm.typ},
			CommonValidations: spec.CommonValidations{UniqueItems: true},
			ParamProps:        spec.ParamProps{Name: prm.name, In: prm.in, Description: prm.desc, Required: prm.in == "path"},
		})
	}
	if op.body != "" {
		o.Parameters = append(o.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
			Name: "body", In: "body", Required: op.action != "delete",
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: op.ref(op.body)}}}})
	}
	respond := func(code int, desc, model string) {
		r := spec.Response{ResponseProps: spec.ResponseProps{Description: desc}}
		if model != "" {
			r.Schema = &spec.Schema{SchemaProps: spec.SchemaProps{Ref: op.ref(model)}}
		}
		o.Responses.StatusCodeResponses[code] = r
	}
	if op.response != "" {
		respond(http.StatusOK, "OK", op.response)
		switch op.action {
		case "post":
			respond(http.StatusCreated, "Created", op.response)
		case "delete":
			respond(http.StatusAccepted, "Accepted", op.response)
		}
	}
	respond(http.StatusUnauthorized, "Unauthorized", "")
	switch op.method {
	case http.MethodGet:
		item.Get = o
	case http.MethodPost:
		item.Post = o
	case http.MethodPut:
		item.Put = o
	case http.MethodPatch:
		item.Patch = o
	case http.MethodDelete:
		item.Delete = o
	}
}
