package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	"skiff.dev/skiff/api"
)

// patch applies a JSON merge patch (RFC 7386) to the stored object and
// updates it (or its status). Strategic merge patches are applied as merge
// patches: lists are replaced, not merged by key. Without a
// resourceVersion in the patch, a lost race is retried.
func (s *Server) patch(ctx context.Context, info *requestInfo, contentType string, body []byte) (api.Object, error) {
	if err := checkPatchType(contentType); err != nil {
		return nil, err
	}
	patch, err := parsePatch(body)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.reg.Get(ctx, info.kind, info.namespace, info.name)
		if err != nil {
			return nil, err
		}
		var merged json.RawMessage
		if err := applyPatch(cur, patch, &merged); err != nil {
			return nil, err
		}
		obj, err := decodeObject(info.kind, merged, info.namespace, info.name)
		if err != nil {
			return nil, err
		}
		var out api.Object
		if info.sub == "status" {
			out, err = s.reg.UpdateStatus(ctx, info.kind, obj)
		} else {
			out, err = s.reg.Update(ctx, info.kind, obj)
		}
		if api.IsConflict(err) && !patchSetsRV(patch) && attempt < conflictRetries {
			continue
		}
		return out, err
	}
}

func checkPatchType(contentType string) error {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/merge-patch+json", "application/strategic-merge-patch+json":
		return nil
	}
	return api.NewStatusError(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
		fmt.Sprintf("the body of the request was in an unknown format %q - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json", mt))
}

func parsePatch(body []byte) (map[string]any, error) {
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil || p == nil {
		return nil, api.NewBadRequest("the patch must be a JSON object")
	}
	return p, nil
}

func patchSetsRV(p map[string]any) bool {
	m, _ := p["metadata"].(map[string]any)
	_, ok := m["resourceVersion"]
	return ok
}

// applyPatch merges patch into cur's JSON and decodes the result into out.
func applyPatch(cur any, patch map[string]any, out any) error {
	b, err := json.Marshal(cur)
	if err != nil {
		return api.NewInternal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return api.NewInternal(err)
	}
	if b, err = json.Marshal(mergePatch(doc, patch)); err != nil {
		return api.NewInternal(err)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	if err := strictUnmarshal(b, out); err != nil {
		return api.NewBadRequest("apply patch: " + err.Error())
	}
	return nil
}

// mergePatch is RFC 7386: objects merge key by key, null deletes a key,
// anything else (arrays included) replaces.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}
