package apiserver

import (
	"fmt"
	"net/http"

	"skiff.dev/skiff/api"
)

// HAMi's mutating webhook (vgpu.hami.io, on pod CREATE): a created pod's
// HAMi resources are checked and nvidia.com/priority becomes
// CUDA_TASK_PRIORITY in the container's environment (api.HAMiMutateAdmission).
// Its refusal is the webhook's: HAMi answers admission.Errored(500, err),
// which Kubernetes words `admission webhook "vgpu.hami.io" denied the
// request: <err>` with code 500 and no reason.
func admitHAMi(obj api.Object) error {
	p, ok := obj.(*api.Pod)
	if !ok {
		return nil
	}
	if err := api.HAMiMutateAdmission(p); err != nil {
		return api.NewStatusError(http.StatusInternalServerError, "",
			fmt.Sprintf("admission webhook %q denied the request: %v", api.HAMiWebhookName, err))
	}
	return nil
}
