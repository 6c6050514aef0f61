package apiserver

import (
	"context"
	"net/http"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/controlplane/kueue/queueorder"
)

// The positions of pending workloads in the Table of workloads (kubectl
// get workloads -o wide: POSITION IN CLUSTERQUEUE, POSITION IN
// LOCALQUEUE). Kueue keeps no such status field, and the queue manager
// does not write one (a position changes for every workload behind the one
// admitted: that would be a write per waiting workload per admission).
// They are computed when the Table is built, from the stored Workloads and
// LocalQueues of every namespace (queueorder.ListPending: the order the
// manager's cycle uses, the one the visibility API answers with), so a
// user who reads only their namespace still sees the positions of their
// workloads in the whole ClusterQueue. A watch computes them for each
// event it sends.

// negotiateOutput is the package's negotiateOutput with the server's
// printers.
func (s *Server) negotiateOutput(r *http.Request) (*tableOutput, error) {
	out, err := negotiateOutput(r)
	if out != nil {
		ctx := r.Context()
		out.printer = func(k *api.Kind) table.Printer { return s.tablePrinter(ctx, k) }
	}
	return out, err
}

var workloadKind = api.MustKindOf(&api.Workload{})

// tablePrinter is table.For(k), with the positions for Workloads.
func (s *Server) tablePrinter(ctx context.Context, k *api.Kind) table.Printer {
	if k != workloadKind {
		return table.For(k)
	}
	// The positions count every queued workload, whoever asks: read as
	// the server (the rows are what the caller may list, authorized).
	pending, err := queueorder.ListPending(WithoutUser(ctx), s.Local(), "")
	if err != nil {
		s.log.Warn("workload positions for a table", "err", err)
		return table.For(k)
	}
	return table.WorkloadPrinter(queueorder.TablePositions(pending))
}
