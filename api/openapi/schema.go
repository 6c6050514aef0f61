package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// Extension names, as kube-apiserver writes them.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extAction        = "x-kubernetes-action"
	extMergeKey      = "x-kubernetes-patch-merge-key"
	extStrategy      = "x-kubernetes-patch-strategy"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extPreserve      = "x-kubernetes-preserve-unknown-fields"
	skiffModelPrefix = "dev.skiff.api."
)

// listType is a list's x-kubernetes-list-type and, for "map", its
// x-kubernetes-list-map-keys.
type listType struct {
	Type string
	Keys []string
}

// listTypes holds the +listType / +listMapKey markers of Kubernetes'
// sources (k8s.io/api, k8s.io/apimachinery) for the lists skiff's types
// have, by definition name and JSON field. The compiled structs do not
// carry them. Constant table.
var listTypes = map[string]listType{
	"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.finalizers":                         {Type: "set"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.ownerReferences":                    {Type: "map", Keys: []string{"uid"}},
	"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.managedFields":                      {Type: "atomic"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions.dryRun":                          {Type: "atomic"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails.causes":                          {Type: "atomic"},
	"io.k8s.api.core.v1.ConfigMapProjection.items":                                       {Type: "atomic"},
	"io.k8s.api.core.v1.DownwardAPIProjection.items":                                     {Type: "atomic"},
	"io.k8s.api.core.v1.ProjectedVolumeSource.sources":                                   {Type: "atomic"},
	"io.k8s.api.core.v1.ContainerImage.names":                                            {Type: "atomic"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector.matchExpressions":                {Type: "atomic"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement.values":               {Type: "atomic"},
	"io.k8s.api.core.v1.PodSpec.containers":                                              {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodSpec.initContainers":                                          {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodSpec.ephemeralContainers":                                     {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodSpec.volumes":                                                 {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodSpec.tolerations":                                             {Type: "atomic"},
	"io.k8s.api.core.v1.PodDNSConfig.nameservers":                                        {Type: "atomic"},
	"io.k8s.api.core.v1.PodDNSConfig.searches":                                           {Type: "atomic"},
	"io.k8s.api.core.v1.PodDNSConfig.options":                                            {Type: "atomic"},
	"io.k8s.api.core.v1.PodSpec.topologySpreadConstraints":                               {Type: "map", Keys: []string{"topologyKey", "whenUnsatisfiable"}},
	"io.k8s.api.core.v1.TopologySpreadConstraint.matchLabelKeys":                         {Type: "atomic"},
	"io.k8s.api.core.v1.PodAffinity.requiredDuringSchedulingIgnoredDuringExecution":      {Type: "atomic"},
	"io.k8s.api.core.v1.PodAffinity.preferredDuringSchedulingIgnoredDuringExecution":     {Type: "atomic"},
	"io.k8s.api.core.v1.PodAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution":  {Type: "atomic"},
	"io.k8s.api.core.v1.PodAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution": {Type: "atomic"},
	"io.k8s.api.core.v1.PodAffinityTerm.namespaces":                                      {Type: "atomic"},
	"io.k8s.api.core.v1.PodAffinityTerm.matchLabelKeys":                                  {Type: "atomic"},
	"io.k8s.api.core.v1.PodAffinityTerm.mismatchLabelKeys":                               {Type: "atomic"},
	"io.k8s.api.core.v1.Container.ports":                                                 {Type: "map", Keys: []string{"containerPort", "protocol"}},
	"io.k8s.api.core.v1.Container.env":                                                   {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.Container.envFrom":                                               {Type: "atomic"},
	"io.k8s.api.core.v1.Capabilities.add":                                                {Type: "atomic"},
	"io.k8s.api.core.v1.ResourceQuotaSpec.scopes":                                        {Type: "atomic"},
	"io.k8s.api.core.v1.ScopeSelector.matchExpressions":                                  {Type: "atomic"},
	"io.k8s.api.core.v1.ScopedResourceSelectorRequirement.values":                        {Type: "atomic"},
	"io.k8s.api.core.v1.LimitRangeSpec.limits":                                           {Type: "atomic"},
	"io.k8s.api.core.v1.Capabilities.drop":                                               {Type: "atomic"},
	"io.k8s.api.core.v1.PodSecurityContext.supplementalGroups":                           {Type: "atomic"},
	"io.k8s.api.core.v1.PodSecurityContext.sysctls":                                      {Type: "atomic"},
	"io.k8s.api.core.v1.Container.volumeMounts":                                          {Type: "map", Keys: []string{"mountPath"}},
	"io.k8s.api.core.v1.Container.command":                                               {Type: "atomic"},
	"io.k8s.api.core.v1.Container.args":                                                  {Type: "atomic"},
	"io.k8s.api.core.v1.ServiceSpec.ports":                                               {Type: "map", Keys: []string{"port", "protocol"}},
	"io.k8s.api.core.v1.ServiceSpec.clusterIPs":                                          {Type: "atomic"},
	"io.k8s.api.core.v1.PodStatus.conditions":                                            {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.core.v1.PodStatus.podIPs":                                                {Type: "map", Keys: []string{"ip"}},
	"io.k8s.api.core.v1.PodStatus.containerStatuses":                                     {Type: "atomic"},
	"io.k8s.api.core.v1.PodStatus.initContainerStatuses":                                 {Type: "atomic"},
	"io.k8s.api.core.v1.PodStatus.ephemeralContainerStatuses":                            {Type: "atomic"},
	"io.k8s.api.core.v1.NodeSpec.podCIDRs":                                               {Type: "set"},
	"io.k8s.api.core.v1.NodeSpec.taints":                                                 {Type: "atomic"},
	"io.k8s.api.core.v1.NodeStatus.conditions":                                           {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.core.v1.NodeStatus.addresses":                                            {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.core.v1.NodeStatus.images":                                               {Type: "atomic"},
	"io.k8s.api.core.v1.NodeSelector.nodeSelectorTerms":                                  {Type: "atomic"},
	"io.k8s.api.core.v1.NodeSelectorTerm.matchExpressions":                               {Type: "atomic"},
	"io.k8s.api.core.v1.NodeSelectorTerm.matchFields":                                    {Type: "atomic"},
	"io.k8s.api.core.v1.NodeSelectorRequirement.values":                                  {Type: "atomic"},
	"io.k8s.api.core.v1.NodeAffinity.preferredDuringSchedulingIgnoredDuringExecution":    {Type: "atomic"},
	"io.k8s.api.core.v1.ConfigMapVolumeSource.items":                                     {Type: "atomic"},
	"io.k8s.api.core.v1.SecretVolumeSource.items":                                        {Type: "atomic"},
	"io.k8s.api.core.v1.ExecAction.command":                                              {Type: "atomic"},
	"io.k8s.api.core.v1.HTTPGetAction.httpHeaders":                                       {Type: "atomic"},
	"io.k8s.api.core.v1.NamespaceSpec.finalizers":                                        {Type: "atomic"},
	"io.k8s.api.core.v1.EndpointSubset.addresses":                                        {Type: "atomic"},
	"io.k8s.api.core.v1.EndpointSubset.notReadyAddresses":                                {Type: "atomic"},
	"io.k8s.api.core.v1.EndpointSubset.ports":                                            {Type: "atomic"},
	"io.k8s.api.core.v1.Endpoints.subsets":                                               {Type: "atomic"},
	"io.k8s.api.apps.v1.DeploymentStatus.conditions":                                     {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec.metrics":                      {Type: "atomic"},
	"io.k8s.api.autoscaling.v2.HPAScalingRules.policies":                                 {Type: "atomic"},
	"io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus.currentMetrics":             {Type: "atomic"},
	"io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus.conditions":                 {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.apps.v1.DaemonSetStatus.conditions":                                      {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.apps.v1.StatefulSetStatus.conditions":                                    {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.apps.v1.StatefulSetSpec.volumeClaimTemplates":                            {Type: "atomic"},
	"io.k8s.api.policy.v1.PodDisruptionBudgetStatus.conditions":                          {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.discovery.v1.EndpointSlice.endpoints":                                    {Type: "atomic"},
	"io.k8s.api.discovery.v1.EndpointSlice.ports":                                        {Type: "atomic"},
	"io.k8s.api.discovery.v1.Endpoint.addresses":                                         {Type: "set"},
	"io.k8s.api.core.v1.ResourceRequirements.claims":                                     {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodSpec.resourceClaims":                                          {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PodStatus.resourceClaimStatuses":                                 {Type: "map", Keys: []string{"name"}},
	"io.k8s.api.core.v1.PersistentVolumeSpec.accessModes":                                {Type: "atomic"},
	"io.k8s.api.core.v1.PersistentVolumeClaimSpec.accessModes":                           {Type: "atomic"},
	"io.k8s.api.core.v1.PersistentVolumeClaimStatus.accessModes":                         {Type: "atomic"},
	"io.k8s.api.core.v1.PersistentVolumeClaimStatus.conditions":                          {Type: "map", Keys: []string{"type"}},
	"io.k8s.api.core.v1.TopologySelectorTerm.matchLabelExpressions":                      {Type: "atomic"},
	"io.k8s.api.core.v1.TopologySelectorLabelRequirement.values":                         {Type: "atomic"},
}

// Leaf types of skiff without OpenAPI methods of their own, and the
// Kubernetes type that has them.
var leafCounterparts = map[reflect.Type]reflect.Type{
	reflect.TypeFor[api.Time]():      reflect.TypeFor[metav1.Time](),
	reflect.TypeFor[api.MicroTime](): reflect.TypeFor[metav1.MicroTime](),
}

type (
	modelNamer   interface{ OpenAPIModelName() string }
	schemaTyper  interface{ OpenAPISchemaType() []string }
	schemaFormat interface{ OpenAPISchemaFormat() string }
	oneOfTyper   interface{ OpenAPIV3OneOfTypes() []string }
)

// definition is one named schema and where it came from.
type definition struct {
	schema spec.Schema
	// from is the skiff type that made it (nil for lists and Patch).
	from reflect.Type
	// refs are the definitions its schema names.
	refs []string
}

// builder makes the definitions of one OpenAPI version.
type builder struct {
	v3   bool
	docs *api.Docs
	defs map[string]*definition
	err  error
}

func (b *builder) ref(name string) spec.Ref {
	if b.v3 {
		return spec.MustCreateRef("#/components/schemas/" + name)
	}
	return spec.MustCreateRef("#/definitions/" + name)
}

// modelName is the definition name of skiff struct st whose Kubernetes
// counterpart is kt (nil when it has none).
func modelName(st, kt reflect.Type) string {
	if kt != nil {
		if n, ok := reflect.Zero(kt).Interface().(modelNamer); ok {
			return n.OpenAPIModelName()
		}
	}
	if n, ok := reflect.Zero(st).Interface().(modelNamer); ok {
		return n.OpenAPIModelName()
	}
	return skiffModelPrefix + st.Name()
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// isLeaf reports whether t has OpenAPI methods (Quantity, IntOrString,
// metav1.Time), that is whether it is a named leaf definition.
func isLeaf(t reflect.Type) bool {
	_, ok := reflect.Zero(t).Interface().(schemaTyper)
	return ok
}

// leafOf returns the type whose OpenAPI methods describe st (st itself,
// its Kubernetes counterpart kt, or a known one), or nil.
func leafOf(st, kt reflect.Type) reflect.Type {
	switch {
	case isLeaf(st):
		return st
	case kt != nil && isLeaf(kt):
		return kt
	case leafCounterparts[st] != nil:
		return leafCounterparts[st]
	}
	return nil
}

// kubeFields maps the JSON names of Kubernetes struct kt (embedded inline
// structs flattened) to its fields.
func kubeFields(kt reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	if kt == nil || kt.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < kt.NumField(); i++ {
		f := kt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			for n, sf := range kubeFields(deref(f.Type)) {
				out[n] = sf
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// elem is the element type of a slice, array or map kt, or nil.
func elem(kt reflect.Type) reflect.Type {
	kt = deref(kt)
	if kt == nil {
		return nil
	}
	switch kt.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return kt.Elem()
	}
	return nil
}

// schemaOf is the schema of a value of skiff type st (Kubernetes
// counterpart kt, nil if none). Structs and leaf types become references
// to definitions, made on the way; refs collects their names.
func (b *builder) schemaOf(st, kt reflect.Type, refs *[]string) spec.Schema {
	st, kt = deref(st), deref(kt)
	if leaf := leafOf(st, kt); leaf != nil {
		name := b.leafDefinition(leaf)
		*refs = append(*refs, name)
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(name)}}
	}
	switch st {
	case reflect.TypeFor[json.RawMessage]():
		s := *spec.MapProperty(nil)
		s.AdditionalProperties = nil
		s.AddExtension(extPreserve, true)
		return s
	}
	switch st.Kind() {
	case reflect.Struct:
		name := b.structDefinition(st, kt)
		*refs = append(*refs, name)
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(name)}}
	case reflect.Interface:
		s := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
		s.AddExtension(extPreserve, true)
		return s
	case reflect.Slice, reflect.Array:
		if st.Elem().Kind() == reflect.Uint8 {
			return *spec.StrFmtProperty("byte")
		}
		item := b.schemaOf(st.Elem(), elem(kt), refs)
		return *spec.ArrayProperty(&item)
	case reflect.Map:
		item := b.schemaOf(st.Elem(), elem(kt), refs)
		return *spec.MapProperty(&item)
	case reflect.String:
		return *spec.StringProperty()
	case reflect.Bool:
		return *spec.BoolProperty()
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return *spec.Int32Property()
	case reflect.Int, reflect.Int64:
		return *spec.Int64Property()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"integer"}}}
	case reflect.Float32, reflect.Float64:
		return *spec.Float64Property()
	}
	b.fail(fmt.Errorf("no OpenAPI schema for Go type %v", st))
	return spec.Schema{}
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// leafDefinition makes the definition of a type with OpenAPI methods.
func (b *builder) leafDefinition(t reflect.Type) string {
	name := modelName(t, nil)
	if _, ok := b.defs[name]; ok {
		return name
	}
	v := reflect.Zero(t).Interface()
	var s spec.Schema
	if o, ok := v.(oneOfTyper); ok && b.v3 {
		for _, typ := range o.OpenAPIV3OneOfTypes() {
			s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
		}
	} else {
		s.Type = v.(schemaTyper).OpenAPISchemaType()
	}
	if f, ok := v.(schemaFormat); ok {
		s.Format = f.OpenAPISchemaFormat()
	}
	s.Description = leafDescriptions[name]
	b.defs[name] = &definition{schema: s, from: t}
	return name
}

// leafDescriptions are Kubernetes' descriptions of its leaf types, short.
var leafDescriptions = map[string]string{
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   "Quantity is a fixed-point representation of a number: a plain number (1, 0.5) or one with a suffix: binary (Ki, Mi, Gi, Ti, Pi, Ei), decimal (m, k, M, G, T, P, E) or an exponent (1e3).",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString is a type that can hold an int32 or a string (a port number or name, a count or a percentage).",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       "Time is a timestamp in RFC 3339 form, to the second (2025-01-02T15:04:05Z).",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  "MicroTime is a timestamp in RFC 3339 form with microseconds (2025-01-02T15:04:05.000000Z).",
}

// structDefinition makes the definition of skiff struct st, beside its
// Kubernetes counterpart kt (nil if none).
func (b *builder) structDefinition(st, kt reflect.Type) string {
	name := modelName(st, kt)
	if d, ok := b.defs[name]; ok {
		if d.from != st {
			b.fail(fmt.Errorf("definition %s made from two skiff types: %v and %v", name, d.from, st))
		}
		return name
	}
	d := &definition{from: st}
	b.defs[name] = d // before the fields: a type may hold itself
	s := spec.Schema{SchemaProps: spec.SchemaProps{
		Description: describe(b.docs.Type(st.Name())),
		Type:        spec.StringOrArray{"object"},
		Properties:  map[string]spec.Schema{},
	}}
	kf := kubeFields(kt)
	for _, f := range api.Fields(st) {
		k, hasK := kf[f.Name]
		var kft reflect.Type
		if hasK {
			kft = k.Type
		}
		p := b.schemaOf(f.Type, kft, &d.refs)
		desc := describe(b.docs.Field(f))
		if p.Ref.GetURL() != nil {
			p = b.wrap(p, desc)
		} else {
			p.Description = desc
		}
		if hasK {
			if key := k.Tag.Get("patchMergeKey"); key != "" {
				p.AddExtension(extMergeKey, key)
			}
			if strategy := k.Tag.Get("patchStrategy"); strategy != "" {
				p.AddExtension(extStrategy, strategy)
			}
		}
		if lt, ok := listTypes[name+"."+f.Name]; ok {
			p.AddExtension(extListType, lt.Type)
			if len(lt.Keys) > 0 {
				p.AddExtension(extListMapKeys, lt.Keys)
			}
		}
		s.Properties[f.Name] = p
		if f.Required() {
			s.Required = append(s.Required, f.Name)
		}
	}
	sort.Strings(s.Required)
	d.schema = s
	return name
}

// describe makes a doc comment a description: the lines of a paragraph
// joined (kubectl wraps them itself), paragraphs kept.
func describe(doc string) string {
	paras := strings.Split(strings.TrimSpace(doc), "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}

// gvkExtension is the value of x-kubernetes-group-version-kind for k.
func gvk(group, version, kind string) map[string]string {
	return map[string]string{"group": group, "version": version, "kind": kind}
}

// kindDefinition makes the definitions of kind k and of its List, and
// returns their names.
func (b *builder) kindDefinition(k *api.Kind) (object, list string) {
	kt, _ := patch.KubernetesType(k.APIVersion(), k.Kind)
	var refs []string
	b.schemaOf(k.Type, kt, &refs)
	object = refs[len(refs)-1]
	d := b.defs[object]
	d.schema.AddExtension(extGVK, []map[string]string{gvk(k.Group, k.Version, k.Kind)})

	list = object + "List"
	if object == skiffModelPrefix+k.Type.Name() {
		list = skiffModelPrefix + k.Kind + "List"
	}
	var lrefs []string
	meta := b.schemaOf(reflect.TypeFor[api.ListMeta](), reflect.TypeFor[metav1.ListMeta](), &lrefs)
	item := spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(object)}}
	lrefs = append(lrefs, object)
	ls := spec.Schema{SchemaProps: spec.SchemaProps{
		Description: fmt.Sprintf("%sList is a list of %s.", k.Kind, k.Kind),
		Type:        spec.StringOrArray{"object"},
		Required:    []string{"items"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty().WithDescription("APIVersion of the list: " + k.APIVersion() + "."),
			"kind":       *spec.StringProperty().WithDescription("Kind of the list: " + k.Kind + "List."),
			"items":      *spec.ArrayProperty(&item).WithDescription("The " + k.Resource + "."),
			"metadata":   b.wrap(meta, "Standard list metadata: resourceVersion, continue."),
		},
	}}
	ls.AddExtension(extGVK, []map[string]string{gvk(k.Group, k.Version, k.Kind+"List")})
	b.defs[list] = &definition{schema: ls, refs: lrefs}
	return object, list
}

// wrap gives a reference a description. OpenAPI 3.0 ignores siblings of
// $ref: there, as kube-apiserver does, the reference goes into an allOf.
func (b *builder) wrap(ref spec.Schema, desc string) spec.Schema {
	if b.v3 {
		ref = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{ref}}}
	}
	ref.Description = desc
	return ref
}

// namedDefinition makes the definition of a skiff type that is not a kind
// (Status, DeleteOptions, Scale) beside its Kubernetes counterpart.
func (b *builder) namedDefinition(st, kt reflect.Type, g, v, kind string) string {
	var refs []string
	b.schemaOf(st, kt, &refs)
	name := refs[len(refs)-1]
	if kind != "" {
		d := b.defs[name]
		d.schema.AddExtension(extGVK, []map[string]string{gvk(g, v, kind)})
	}
	return name
}

// closure is every definition reachable from roots, sorted.
func (b *builder) closure(roots ...string) []string {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		if d := b.defs[n]; d != nil {
			for _, r := range d.refs {
				visit(r)
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
