package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// HPAView is what the autoscaler view draws (GET api/hpa/NAMESPACE/NAME):
// the autoscaler and its decisions, oldest first, as the controller
// posted them to the autoscaler's trace after each sync (api/trace_hpa.go:
// the replica counts, the steps with their inputs, and each metric's
// value per pod). The trace is the API server's bounded in-memory ring
// (api.MaxTraceSpans per object: 50 minutes at the default 15 s sync), so
// the plot needs no store of its own: one sample per sync, the values the
// decision was made on.
type HPAView struct {
	HPA       *api.HorizontalPodAutoscaler `json:"hpa"`
	Decisions []api.HPADecision            `json:"decisions"`
}

// GetHPAView reads an autoscaler and its decisions through c, as the
// session's user (get horizontalpodautoscalers, and its trace
// subresource).
func GetHPAView(ctx context.Context, c client.Interface, namespace, name string) (*HPAView, error) {
	k := api.MustKindOf(&api.HorizontalPodAutoscaler{})
	obj, err := c.Get(ctx, k, namespace, name)
	if err != nil {
		return nil, err
	}
	t, ok := c.(client.ObjectTracer)
	if !ok {
		return nil, api.NewStatusError(http.StatusServiceUnavailable, api.ReasonServiceUnavail, "this dashboard cannot read the autoscalers' decisions")
	}
	tr, err := t.GetObjectTrace(ctx, k, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("decisions of horizontalpodautoscaler %s/%s: %w", namespace, name, err)
	}
	ds := api.HPADecisions(tr.Spans)
	if ds == nil {
		ds = []api.HPADecision{}
	}
	return &HPAView{HPA: obj.(*api.HorizontalPodAutoscaler), Decisions: ds}, nil
}

func (d *Dashboard) serveHPA(w http.ResponseWriter, r *http.Request, rest string) {
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		api.WriteStatus(w, api.NewBadRequest("want /dashboard/api/hpa/NAMESPACE/NAME"))
		return
	}
	v, err := GetHPAView(r.Context(), d.cfg.Client, ns, name)
	if err != nil {
		api.WriteStatus(w, err)
		return
	}
	writeJSON(w, v)
}
