package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// patch applies the request's patch (JSON, merge or strategic merge patch,
// by its Content-Type; package api/patch) to the stored object and updates
// it, or its status. The patched document is decoded as strictly as a PUT
// body. A lost race is retried with the new object, unless the patch set
// the resourceVersion itself: then the conflict is the answer. A patch that
// fails changes nothing.
func (s *Server) patch(ctx context.Context, info *requestInfo, contentType string, body []byte) (api.Object, error) {
	k := info.kind
	pt, err := patchTypeOf(contentType, k.APIVersion(), k.Kind)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.reg.Get(ctx, k, info.namespace, info.name)
		if err != nil {
			return nil, err
		}
		patched, setsRV, err := applyPatch(pt, k.APIVersion(), k.Kind, cur, body)
		if err != nil {
			return nil, err
		}
		obj, err := decodeObjectCtx(ctx, k, patched, info.namespace, info.name)
		if err != nil {
			return nil, err
		}
		var out api.Object
		switch info.sub {
		case "status":
			out, err = s.reg.UpdateStatus(ctx, k, obj)
		case "ephemeralcontainers":
			out, err = s.reg.UpdateEphemeralContainers(ctx, info.namespace, info.name, obj.(*api.Pod))
		default:
			out, err = s.reg.Update(ctx, k, obj)
		}
		if api.IsConflict(err) && !setsRV && attempt < conflictRetries {
			continue
		}
		return out, err
	}
}

// patchScale is patch for the scale subresource (an autoscaling/v1 Scale).
func (s *Server) patchScale(ctx context.Context, info *requestInfo, contentType string, body []byte) (*api.Scale, error) {
	const apiVersion, kind = "autoscaling/v1", "Scale"
	pt, err := patchTypeOf(contentType, apiVersion, kind)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.reg.GetScale(ctx, info.kind, info.namespace, info.name)
		if err != nil {
			return nil, err
		}
		patched, setsRV, err := applyPatch(pt, apiVersion, kind, cur, body)
		if err != nil {
			return nil, err
		}
		var sc api.Scale
		if err := strictUnmarshal(patched, &sc); err != nil {
			return nil, api.NewBadRequest("decode Scale: " + err.Error())
		}
		out, err := s.reg.UpdateScale(ctx, info.kind, info.namespace, info.name, &sc)
		if api.IsConflict(err) && !setsRV && attempt < conflictRetries {
			continue
		}
		return out, err
	}
}

// patchTypeOf returns the patch type of a request, or kube-apiserver's 415
// for a type it does not take for this kind: strategic merge patches need a
// Kubernetes schema, and server-side apply is not implemented.
func patchTypeOf(contentType, apiVersion, kind string) (patch.Type, error) {
	t := patch.ParseType(contentType)
	accepted := patch.Supported(apiVersion, kind)
	names := make([]string, len(accepted))
	for i, a := range accepted {
		if a == t {
			return t, nil
		}
		names[i] = string(a)
	}
	return "", api.NewStatusError(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
		"the body of the request was in an unknown format - accepted media types include: "+strings.Join(names, ", "))
}

// applyPatch applies body, a patch of type t, to the JSON of cur (an object
// of apiVersion/kind) and returns the patched JSON, and whether the patch
// changed the resourceVersion (an optimistic-concurrency precondition).
// Errors are answered as kube-apiserver does: 400 for a malformed patch,
// 422 for one that does not apply, 413 for too many operations.
func applyPatch(t patch.Type, apiVersion, kind string, cur any, body []byte) ([]byte, bool, error) {
	doc, err := json.Marshal(cur)
	if err != nil {
		return nil, false, api.NewInternal(err)
	}
	out, err := patch.Apply(t, apiVersion, kind, doc, body)
	if err != nil {
		return nil, false, patchError(err)
	}
	return out, resourceVersion(out) != resourceVersion(doc), nil
}

func patchError(err error) error {
	var pe *patch.Error
	if !errors.As(err, &pe) {
		return api.NewInternal(err)
	}
	switch pe.Reason {
	case patch.Malformed:
		return api.NewBadRequest(pe.Error())
	case patch.TooLarge:
		return api.NewStatusError(http.StatusRequestEntityTooLarge, api.ReasonTooLarge, "Request entity too large: "+pe.Error())
	}
	// kube-apiserver's message for a patch that does not apply says no more;
	// the cause says what failed.
	e := api.NewStatusError(http.StatusUnprocessableEntity, api.ReasonInvalid, "the server rejected our request due to an error in our request")
	e.Status.Details = &api.StatusDetails{Causes: []api.StatusCause{{Type: "FieldValueInvalid", Message: pe.Error(), Field: "patch"}}}
	return e
}

// resourceVersion reads metadata.resourceVersion of a JSON object.
func resourceVersion(doc []byte) string {
	var o struct {
		Metadata struct {
			ResourceVersion any `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc, &o) != nil || o.Metadata.ResourceVersion == nil {
		return ""
	}
	b, _ := json.Marshal(o.Metadata.ResourceVersion)
	return string(b)
}
