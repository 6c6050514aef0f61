package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// # Server-side apply and managedFields
//
// PATCH with Content-Type application/apply-patch+yaml (kubectl apply
// --server-side) is Kubernetes' server-side apply, done by Kubernetes' own
// library: k8s.io/apimachinery's field manager (managedfields), with the
// type converter of client-go's applyconfigurations over the k8s.io/api
// types. skiff objects go to and from those types through JSON (skiff's
// types carry Kubernetes' JSON names). The applied configuration is first
// decoded by skiff's strict decoder, so a field skiff does not support is
// refused with its path, as in any other body. The field manager merges it
// into the live object, records what the manager owns in
// metadata.managedFields and answers a conflict (another manager owns a
// field the configuration changes) with Kubernetes' 409 naming the fields
// and managers, unless ?force=true. An object that does not exist is
// created.
//
// Ordinary HTTP creates, updates and patches of an object (not of its
// status or scale) update managedFields too (FieldManager.UpdateNoErrors),
// with the manager named by ?fieldManager= or the User-Agent's prefix, as
// kube-apiserver does, so ownership is tracked as on a real cluster. The
// library tracks an object from its creation; a create of the same shape
// as a recent one reuses that one's entry (createfields.go). Writes of the
// registry's in-process callers (Local: the controllers) and of the status
// subresource keep managedFields as they are.

// fieldManagerKey marks a request context whose writes update managedFields.
type fieldManagerKey struct{}

// fieldManagers are the field managers, one per kind, built once on first
// use (building one parses the kind's schema; the writes that come first
// wait for that one build); read-only afterwards.
var fieldManagers sync.Map // GroupVersionKind → func() (*managedfields.FieldManager, error)

// typeConverter is client-go's type converter of the k8s.io/api types.
var typeConverter = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(k8sScheme())
})

// WarmUp builds what the first writes would otherwise wait for, once per
// process (a second call waits for the first, then does nothing): the type
// converter (client-go's OpenAPI schema, parsed: some 60 ms on two cores),
// the pods' field manager and the conversion of a pod to its Kubernetes
// type. kube-apiserver builds its own before it reports ready;
// controlplane.Start waits for it, started first thing, so that a burst of
// creates at once (a class applying lab 1) does not queue behind it.
var WarmUp = sync.OnceFunc(func() {
	if _, err := fieldManagerFor(podKind); err != nil {
		panic(err) // pods have a Kubernetes type
	}
	if _, err := toTyped(podKind, &api.Pod{}); err != nil {
		panic(err)
	}
})

// gvkOf is k's GroupVersionKind.
func gvkOf(k *api.Kind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// fieldManagerFor returns the field manager of k, or an error when k has no
// Kubernetes type (skiff's own kinds).
func fieldManagerFor(k *api.Kind) (*managedfields.FieldManager, error) {
	gvk := gvkOf(k)
	build, ok := fieldManagers.Load(gvk)
	if !ok {
		build, _ = fieldManagers.LoadOrStore(gvk, sync.OnceValues(func() (*managedfields.FieldManager, error) {
			s := k8sScheme()
			if !s.Recognizes(gvk) {
				return nil, fmt.Errorf("%s has no Kubernetes type", k.GroupKind())
			}
			fm, err := managedfields.NewDefaultFieldManager(typeConverter(), s, s, s, gvk, gvk.GroupVersion(), "", nil)
			if err != nil {
				return nil, fmt.Errorf("field manager for %s: %w", k.GroupKind(), err)
			}
			return fm, nil
		}))
	}
	return build.(func() (*managedfields.FieldManager, error))()
}

// toTyped converts a skiff object of kind k to its k8s.io/api type, as a
// JSON round trip would (api.ConvertJSON).
func toTyped(k *api.Kind, obj api.Object) (runtime.Object, error) {
	out, err := k8sScheme().New(gvkOf(k))
	if err != nil {
		return nil, err
	}
	if err := api.ConvertJSON(out, obj); err != nil { // a JSON round trip, without the JSON
		return nil, fmt.Errorf("%s as Kubernetes' %T: %w", k.Kind, out, err)
	}
	out.GetObjectKind().SetGroupVersionKind(gvkOf(k))
	return out, nil
}

// managerOrUserAgent is kube-apiserver's: the fieldManager given, else the
// User-Agent up to its first '/' ("kubectl"), bounded and printable.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	ua := strings.Split(userAgent, "/")[0]
	if len(ua) > metav1validation.FieldManagerMaxLength {
		ua = ua[:metav1validation.FieldManagerMaxLength]
	}
	for _, r := range ua {
		if !unicode.IsPrint(r) {
			return "unknown"
		}
	}
	return ua
}

// trackingContext marks the context of an HTTP create, update or
// non-apply patch of an object so that the registry updates its
// managedFields, and checks ?fieldManager= as kube-apiserver does (422).
func trackingContext(ctx context.Context, r *http.Request, info *requestInfo) (context.Context, error) {
	options := bodyOptionsKind(r.Method)
	if options == "" {
		return ctx, nil
	}
	manager := queryGet(r, "fieldManager")
	if errs := metav1validation.ValidateFieldManager(manager, field.NewPath("fieldManager")); len(errs) > 0 {
		return nil, invalidOptions(options, errs)
	}
	if info.sub != "" || info.kind.Internal || patch.ParseType(r.Header.Get("Content-Type")) == patch.ApplyPatch {
		return ctx, nil // apply records its own; subresources keep theirs
	}
	return context.WithValue(ctx, fieldManagerKey{}, managerOrUserAgent(manager, r.UserAgent())), nil
}

// trackFields updates next's managedFields for a tracked write (the
// context says by which manager); cur is the stored object, nil on create.
// It changes only next's managedFields, and never fails the write: a kind
// without a Kubernetes type, or an object the library cannot read, keeps
// the managedFields it has (as UpdateNoErrors clears them on error). A
// plain create's entry comes from createFields when an object of the same
// shape was created before (createfields.go).
func (r *Registry) trackFields(ctx context.Context, k *api.Kind, cur, next api.Object) {
	manager, ok := ctx.Value(fieldManagerKey{}).(string)
	if !ok {
		return
	}
	fm, err := fieldManagerFor(k)
	if err != nil {
		return
	}
	if cur != nil {
		r.updateFields(fm, k, manager, cur, next)
		return
	}
	key, plain := createFieldsKey(k, manager, next) // createfields.go
	if plain {
		if entries, ok := createFields.Get(key); ok {
			next.GetObjectMeta().ManagedFields = withTimeNow(entries)
			return
		}
	}
	if r.updateFields(fm, k, manager, nil, next) && plain {
		createFields.Put(key, withTimeNow(next.GetObjectMeta().ManagedFields))
	}
}

// updateFields is the field manager's update of next's managedFields by
// manager (cur nil on create), and whether next's managedFields are its
// result: false where the library could not read an object.
func (r *Registry) updateFields(fm *managedfields.FieldManager, k *api.Kind, manager string, cur, next api.Object) bool {
	var live runtime.Object
	var err error
	if cur == nil {
		live, err = k8sScheme().New(gvkOf(k))
	} else {
		live, err = toTyped(k, cur)
	}
	if err != nil {
		r.log.Debug("managed fields: live object", "kind", k.Kind, "err", err)
		return false
	}
	obj, err := toTyped(k, next)
	if err != nil {
		r.log.Debug("managed fields: new object", "kind", k.Kind, "err", err)
		return false
	}
	out := fm.UpdateNoErrors(live, obj, manager)
	if err := setManagedFields(next, out); err != nil {
		r.log.Debug("managed fields: result", "kind", k.Kind, "err", err)
		return false
	}
	return true
}

// setManagedFields copies the managedFields of a typed object into obj,
// field by field: what a JSON round trip of the entries gives (a time at
// whole seconds in UTC, nil when zero; the fields' JSON compacted and
// HTML-escaped), without one (TestSetManagedFieldsIsTheJSONRoundTrip).
func setManagedFields(obj api.Object, typed runtime.Object) error {
	o, ok := typed.(metav1.Object)
	if !ok {
		return fmt.Errorf("%T has no object metadata", typed)
	}
	var entries []api.ManagedFieldsEntry
	if mf := o.GetManagedFields(); len(mf) > 0 {
		entries = make([]api.ManagedFieldsEntry, len(mf))
		for i, e := range mf {
			out := &entries[i]
			out.Manager, out.Operation, out.APIVersion = e.Manager, string(e.Operation), e.APIVersion
			out.FieldsType, out.Subresource = e.FieldsType, e.Subresource
			if e.Time != nil && !e.Time.IsZero() {
				out.Time = &api.Time{Time: e.Time.UTC().Truncate(time.Second)}
			}
			if e.FieldsV1 != nil {
				// Compacted and HTML-escaped, as encoding/json writes a
				// Marshaler's JSON.
				var c, b bytes.Buffer
				if err := json.Compact(&c, e.FieldsV1.GetRawBytes()); err != nil {
					return fmt.Errorf("managedFields[%d].fieldsV1: %w", i, err)
				}
				json.HTMLEscape(&b, c.Bytes())
				out.FieldsV1 = b.Bytes()
			}
		}
	}
	obj.GetObjectMeta().ManagedFields = entries
	return nil
}

// serveApply is server-side apply: PATCH with application/apply-patch+yaml.
func (s *Server) serveApply(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	obj, created, err := s.apply(r.Context(), r, info, body)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	respond(w, code, obj, err)
}

func (s *Server) apply(ctx context.Context, r *http.Request, info *requestInfo, body []byte) (api.Object, bool, error) {
	k := info.kind
	q := r.URL.Query()
	opts := metav1.PatchOptions{FieldManager: q.Get("fieldManager")}
	if q.Has("force") {
		force, err := strconv.ParseBool(q.Get("force"))
		if err != nil {
			return nil, false, api.NewBadRequest(fmt.Sprintf("invalid force %q: %v", q.Get("force"), err))
		}
		opts.Force = &force
	}
	errs := metav1validation.ValidatePatchOptions(&opts, types.ApplyYAMLPatchType)
	errs = append(errs, metav1validation.ValidateFieldManager(opts.FieldManager, field.NewPath("fieldManager"))...)
	if len(errs) > 0 {
		return nil, false, invalidOptions("PatchOptions", errs)
	}
	if info.sub != "" {
		return nil, false, api.NewBadRequest("server-side apply of " + info.resource() + ": not supported by skiff (apply the object)")
	}
	fm, err := fieldManagerFor(k)
	if err != nil {
		return nil, false, unsupportedMediaType("server-side apply: " + err.Error())
	}
	applied, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return nil, false, api.NewBadRequest("decode apply configuration: " + err.Error())
	}
	// The strict decoder refuses what skiff does not support, with its path,
	// and checks apiVersion, kind, name and namespace against the URL.
	if _, err := decodeObject(k, applied, info.namespace, info.name); err != nil {
		return nil, false, err
	}
	cfg := &unstructured.Unstructured{}
	if err := cfg.UnmarshalJSON(applied); err != nil {
		return nil, false, api.NewBadRequest("decode apply configuration: " + err.Error())
	}
	if cfg.GetManagedFields() != nil {
		// kube-apiserver's words.
		return nil, false, api.NewBadRequest("metadata.managedFields must be nil")
	}
	setsRV := cfg.GetResourceVersion() != ""
	for attempt := 0; ; attempt++ {
		cur, err := s.reg.Get(ctx, k, info.namespace, info.name)
		creating := api.IsNotFound(err)
		if err != nil && !creating {
			return nil, false, err
		}
		var live runtime.Object
		if creating {
			live, err = k8sScheme().New(gvkOf(k))
		} else {
			live, err = toTyped(k, cur)
		}
		if err != nil {
			return nil, false, api.NewInternal(err)
		}
		merged, err := fm.Apply(live, cfg.DeepCopy(), opts.FieldManager, opts.Force != nil && *opts.Force)
		if err != nil {
			return nil, false, applyError(err)
		}
		b, err := json.Marshal(merged)
		if err != nil {
			return nil, false, api.NewInternal(err)
		}
		obj, err := decodeObject(k, b, info.namespace, info.name)
		if err != nil {
			return nil, false, err
		}
		var out api.Object
		if creating {
			obj.GetObjectMeta().ResourceVersion = ""
			out, err = s.reg.Create(ctx, k, obj)
		} else {
			out, err = s.reg.Update(ctx, k, obj)
		}
		retry := (api.IsConflict(err) && !setsRV) || (creating && api.IsAlreadyExists(err))
		if retry && attempt < conflictRetries {
			continue
		}
		return out, creating && err == nil, err
	}
}

// applyError answers a failed apply: the library's API errors (409 with
// the conflicting fields and managers) as they are, anything else as 400
// (an apply configuration the schema does not take).
func applyError(err error) error {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return api.NewBadRequest(err.Error())
	}
	ks := st.Status()
	b, merr := json.Marshal(ks)
	if merr != nil {
		return api.NewInternal(merr)
	}
	var out api.Status
	if merr := json.Unmarshal(b, &out); merr != nil {
		return api.NewInternal(merr)
	}
	e := api.NewStatusError(int(ks.Code), api.StatusReason(ks.Reason), ks.Message)
	e.Status = out
	e.Status.TypeMeta = api.TypeMeta{APIVersion: "v1", Kind: "Status"}
	return e
}
