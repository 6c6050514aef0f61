package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
)

// # Dry run
//
// ?dryRun=All (kubectl --dry-run=server, kubectl diff) runs a write as it
// would run (decoding, admission, defaults, validation, preconditions and
// conflicts, a Service's address allocation) and answers what would have
// been stored, but stores nothing: the registry's writes look at the
// request context (withDryRun) and stop before the store's write. A
// dry-run Service create shows the cluster IP and node ports it would get
// without reserving them, so a real create may get others.

type dryRunKey struct{}

// withDryRun marks ctx: registry writes under it store nothing.
func withDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// isDryRun reports whether ctx is a dry run's.
func isDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}

// optionsKind names the options of a write, as kube-apiserver's 422 for an
// invalid one does (dryRunContext); "" for a read.
func optionsKind(method string) string {
	if method == http.MethodDelete {
		return "DeleteOptions"
	}
	return bodyOptionsKind(method)
}

// bodyOptionsKind is optionsKind of a write with a body: a create, update
// or patch, whose options carry fieldManager and fieldValidation
// (trackingContext, withFieldValidation); "" for a read or a delete.
func bodyOptionsKind(method string) string {
	switch method {
	case http.MethodPost:
		return "CreateOptions"
	case http.MethodPut:
		return "UpdateOptions"
	case http.MethodPatch:
		return "PatchOptions"
	}
	return ""
}

// dryRunContext reads ?dryRun= of a write as kube-apiserver does: every
// value must be "All" (else 422, the request's CreateOptions, UpdateOptions,
// PatchOptions or DeleteOptions being invalid), and an empty list is no dry
// run. Writes skiff cannot run without storing (binding, finalize, trace)
// are refused rather than carried out.
func dryRunContext(r *http.Request, info *requestInfo) (context.Context, error) {
	options := optionsKind(r.Method)
	if options == "" {
		return r.Context(), nil // reads ignore it, as kube-apiserver's
	}
	switch info.sub {
	case "", "status", "scale", "eviction", "ephemeralcontainers":
	default:
		return nil, api.NewBadRequest("dryRun: not supported by skiff for " + info.resource())
	}
	return dryRunOption(r.Context(), options, r.URL.Query()["dryRun"])
}

// dryRunOption checks the dryRun list of a write's options (the query's,
// or a DeleteOptions body's) and marks ctx when it is ["All"].
func dryRunOption(ctx context.Context, options string, values []string) (context.Context, error) {
	if errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), values); len(errs) > 0 {
		return nil, invalidOptions(options, errs)
	}
	if len(values) == 0 {
		return ctx, nil
	}
	return withDryRun(ctx), nil
}

// invalidOptions is apierrors.NewInvalid(KIND.meta.k8s.io, "", errs), as
// kube-apiserver answers bad write options.
func invalidOptions(kind string, errs field.ErrorList) *api.StatusError {
	gk := metav1.SchemeGroupVersion.WithKind(kind).GroupKind()
	e := api.NewStatusError(http.StatusUnprocessableEntity, api.ReasonInvalid,
		gk.String()+` "" is invalid: `+errs.ToAggregate().Error())
	e.Status.Details = &api.StatusDetails{Group: gk.Group, Kind: gk.Kind}
	for _, fe := range errs {
		e.Status.Details.Causes = append(e.Status.Details.Causes, api.StatusCause{Type: string(fe.Type), Message: fe.ErrorBody(), Field: fe.Field})
	}
	return e
}

// errDryRun stops a dry run's store update before it writes; the registry
// answers the object it would have written.
var errDryRun = errors.New("dry run: not stored")

// dryRunDelete is what Delete would answer for cur, deleted with grace
// seconds: the object removed (gone), or marked deleting (pending).
func dryRunDelete(k *api.Kind, cur api.Object, grace int64) (api.Object, bool, error) {
	if grace == 0 && !strategy.HasFinalizers(cur) {
		return withTypeMeta(k, api.Clone(cur)), true, nil
	}
	next := api.Clone(cur)
	strategy.MarkDeleting(next, grace, time.Now())
	return withTypeMeta(k, next), false, nil
}

// dryRunCreate is what Create would answer for obj, admitted and valid:
// AlreadyExists when its name is taken (a generated one is not checked),
// else obj itself, unstored.
func (r *Registry) dryRunCreate(ctx context.Context, k *api.Kind, obj api.Object, generated bool) (api.Object, error) {
	m := obj.GetObjectMeta()
	if !generated {
		_, err := r.store.Get(ctx, k, m.Namespace, m.Name)
		if err == nil {
			return nil, api.NewAlreadyExists(k, m.Name)
		}
		if !api.IsNotFound(err) {
			return nil, err
		}
	}
	return withTypeMeta(k, obj), nil
}
