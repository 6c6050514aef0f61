package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"skiff.dev/skiff/agent/gpu/dcgm"
	"skiff.dev/skiff/api"
)

// serveDCGM runs the node's DCGM-exporter-compatible endpoint
// (agent/gpu/dcgm) on Config.DCGMExporterListen until ctx ends: plain
// HTTP, as dcgm-exporter's, for Prometheus and the custom metrics API. A
// port already taken (a real dcgm-exporter on the machine) is logged and
// the agent goes on without it.
func (a *Agent) serveDCGM(ctx context.Context) {
	if a.cfg.DCGMExporterListen == "" || a.cfg.GPUMeter == nil {
		return
	}
	ln, err := net.Listen("tcp", a.cfg.DCGMExporterListen)
	if err != nil {
		a.log.Warn("DCGM exporter not started", "addr", a.cfg.DCGMExporterListen, "err", err)
		return
	}
	a.srvMu.Lock()
	a.dcgmAddr = ln.Addr().String()
	a.srvMu.Unlock()
	srv := dcgm.Server(dcgm.NewCollector(a.cfg.GPUMeter, a.cfg.NodeName))
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	a.log.Info("DCGM exporter listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("DCGM exporter stopped", "err", err)
	}
}

// DCGMExporterAddr is where the DCGM exporter listens ("" until it does,
// or without one).
func (a *Agent) DCGMExporterAddr() string {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	return a.dcgmAddr
}

// serveDCGMMetrics answers GET /metrics/dcgm (api.DCGMMetricsPath) on the
// agent's server: the exporter's series, for the API server's custom and
// external metrics APIs (as prometheus-adapter reads Prometheus).
func (a *Agent) serveDCGMMetrics(w http.ResponseWriter, r *http.Request) {
	if a.cfg.GPUMeter == nil {
		writeStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, "this node has no GPUs"))
		return
	}
	dcgm.Handler(dcgm.NewCollector(a.cfg.GPUMeter, a.cfg.NodeName)).ServeHTTP(w, r)
}
