package apiserver

import (
	"fmt"
	"net/http"

	"skiff.dev/skiff/api"
)

// serveEviction is POST pods/NAME/eviction (policy/v1 Eviction), what
// `kubectl drain` sends for each pod. Kubernetes checks the pod's
// PodDisruptionBudgets first; skiff has none, so an eviction is always
// allowed and is the pod's delete with the Eviction's DeleteOptions
// (graceful: the node stops the pod and deletes it, as for any delete).
// The answer is kube-apiserver's: 201 with a Success Status.
func (s *Server) serveEviction(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	ctx := r.Context()
	var ev api.Eviction
	if err := strictUnmarshal(body, &ev); err != nil {
		writeError(w, api.NewBadRequest("decode Eviction: "+err.Error()))
		return
	}
	if ev.APIVersion != "" && ev.Kind != "" && (ev.Kind != "Eviction" || (ev.APIVersion != "policy/v1" && ev.APIVersion != "policy/v1beta1")) {
		writeError(w, api.NewBadRequest(fmt.Sprintf("the body is a %s %s: send a policy/v1 Eviction", ev.APIVersion, ev.Kind)))
		return
	}
	if ev.Name != info.name {
		// kube-apiserver's words.
		writeError(w, api.NewBadRequest("name in URL does not match name in Eviction object"))
		return
	}
	if ev.Namespace != "" && ev.Namespace != info.namespace {
		writeError(w, api.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ev.Namespace, info.namespace)))
		return
	}
	var opts api.DeleteOptions
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	var err error
	if ctx, err = dryRunOption(ctx, "DeleteOptions", opts.DryRun); err != nil {
		writeError(w, err)
		return
	}
	if err := api.CheckPropagationPolicy(opts.PropagationPolicy); err != nil {
		writeError(w, err)
		return
	}
	if _, _, err := s.reg.Delete(ctx, podKind, info.namespace, info.name, opts); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Status{
		TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Success", Code: http.StatusCreated,
	})
}
