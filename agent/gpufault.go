package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
)

// serveGPUFault injects an Xid into a simulated GPU (?xid=N) or makes it
// healthy again (?clear=true). The health change travels the way a real
// one does: Source event → device plugin's ListAndWatch → device manager
// → Node allocatable (deviceUpdates writes it at once).
func (a *Agent) serveGPUFault(w http.ResponseWriter, r *http.Request) {
	fi := a.cfg.GPUFaults
	if fi == nil {
		writeStatus(w, api.NewBadRequest(fmt.Sprintf("node %s: %v", a.cfg.NodeName, ErrNotSimulated)))
		return
	}
	index, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || index < 0 {
		writeStatus(w, api.NewBadRequest(fmt.Sprintf("GPU index %q: want a number from 0", r.PathValue("index"))))
		return
	}
	q := r.URL.Query()
	clear, err := boolQuery(q.Get("clear"))
	if err != nil {
		writeStatus(w, api.NewBadRequest("clear: "+err.Error()))
		return
	}
	var xid uint64
	if s := q.Get("xid"); s != "" {
		if xid, err = strconv.ParseUint(s, 10, 64); err != nil || xid == 0 {
			writeStatus(w, api.NewBadRequest(fmt.Sprintf("xid %q: want a positive number, like 79", s)))
			return
		}
	}
	switch {
	case clear && xid != 0:
		writeStatus(w, api.NewBadRequest("give either xid or clear, not both"))
		return
	case !clear && xid == 0:
		writeStatus(w, api.NewBadRequest("give xid=N to inject an Xid error, or clear=true to repair the GPU"))
		return
	}
	if clear {
		err = fi.Clear(index)
	} else {
		err = fi.InjectXid(index, xid)
	}
	if errors.Is(err, gpu.ErrNoSuchGPU) {
		writeStatus(w, api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, fmt.Sprintf("node %s has no GPU %d", a.cfg.NodeName, index)))
		return
	}
	if err != nil {
		writeStatus(w, api.NewInternal(fmt.Errorf("GPU %d fault: %w", index, err)))
		return
	}
	res := gputopology.FaultResult{Node: a.cfg.NodeName, Index: index, Healthy: true, Xid: xid, Reason: "cleared: healthy again"}
	if xid != 0 {
		res.Healthy = !gpu.IsCriticalXid(xid)
		res.Reason = fmt.Sprintf("Xid %d: %s", xid, gpu.XidReason(xid))
	}
	if src, ok := fi.(gpu.Source); ok {
		if devs, err := src.Devices(r.Context()); err == nil && index < len(devs) {
			res.UUID, res.Healthy = devs[index].UUID, devs[index].Healthy
		}
	}
	a.log.Info("GPU fault", "index", index, "xid", xid, "clear", clear, "healthy", res.Healthy)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}
