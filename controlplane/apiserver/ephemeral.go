package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/strategy"
)

// UpdateEphemeralContainers is the pods/ephemeralcontainers subresource
// (`kubectl debug`): of in, only spec.ephemeralContainers is taken, as
// Kubernetes' strategy for it drops every other change; they may only be
// added (api.ValidateEphemeralContainersUpdate), each valid as an
// ephemeral container, and the pod must still pass Pod Security. A set
// uid or resourceVersion in in must be the stored one.
func (r *Registry) UpdateEphemeralContainers(ctx context.Context, namespace, name string, in *api.Pod) (api.Object, error) {
	if in.Name != "" && in.Name != name {
		return nil, api.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", in.Name, name))
	}
	want := in.ObjectMeta
	if err := normalizeResourceVersion(&want); err != nil {
		return nil, err
	}
	var dryOut api.Object
	out, err := r.store.GuaranteedUpdate(ctx, podKind, scope(podKind, namespace), name, func(cur api.Object) (api.Object, error) {
		if err := strategy.CheckPrecondition(podKind, cur, want.UID, want.ResourceVersion); err != nil {
			return nil, err
		}
		old := cur.(*api.Pod)
		next := api.Clone(old)
		next.Spec.EphemeralContainers = api.Clone(in).Spec.EphemeralContainers
		api.SetDefaults(next)
		errs := api.Validate(next)
		errs = append(errs, api.ValidateEphemeralContainersUpdate(next, old)...)
		if len(errs) > 0 {
			return nil, api.NewInvalid(podKind, name, errs)
		}
		if strategy.SameObject(next, cur) {
			return cur, nil
		}
		if err := r.admitPodSecurity(ctx, podKind, next, cur, nil); err != nil { // admission_podsecurity.go
			return nil, err
		}
		if isDryRun(ctx) {
			dryOut = next
			return nil, errDryRun
		}
		return next, nil
	})
	if errors.Is(err, errDryRun) {
		return withTypeMeta(podKind, api.Clone(dryOut)), nil
	}
	if err != nil {
		return nil, err
	}
	return withTypeMeta(podKind, out), nil
}

// serveEphemeralContainers answers GET (the pod), PUT (a Pod) and PATCH
// of pods/NAME/ephemeralcontainers.
func (s *Server) serveEphemeralContainers(ctx context.Context, w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	if info.kind != podKind {
		writeError(w, notFoundPath())
		return
	}
	switch r.Method {
	case http.MethodGet:
		obj, err := s.reg.Get(ctx, podKind, info.namespace, info.name)
		respond(w, http.StatusOK, obj, err)
	case http.MethodPut:
		obj, err := decodeObjectCtx(ctx, podKind, body, info.namespace, info.name)
		if err == nil {
			obj, err = s.reg.UpdateEphemeralContainers(ctx, info.namespace, info.name, obj.(*api.Pod))
		}
		respond(w, http.StatusOK, obj, err)
	case http.MethodPatch:
		obj, err := s.patch(ctx, info, r.Header.Get("Content-Type"), body)
		respond(w, http.StatusOK, obj, err)
	default:
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			fmt.Sprintf("method %s is not supported on %s", r.Method, info.resource())))
	}
}
