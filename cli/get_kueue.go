package cli

import (
	"context"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/kueue/queueorder"
)

// workloadCells are the workloads' cells with the positions of the pending
// ones (-o wide: POSITION IN CLUSTERQUEUE, POSITION IN LOCALQUEUE), read
// now from the Workloads and LocalQueues of every namespace, as the API
// server computes them for kubectl. A user who may not list every
// namespace gets the positions in the LocalQueues of the namespace asked
// for (a LocalQueue's workloads all live in it) and an empty position in
// the ClusterQueue.
func (c *getCmd) workloadCells(ctx context.Context, cl client.Interface) func(api.Object, time.Time) []any {
	pending, err := queueorder.ListPending(ctx, cl, "")
	partial := false
	if api.ReasonOf(err) == api.ReasonForbidden && !c.allNamespaces {
		pending, err = queueorder.ListPending(ctx, cl, c.root.Namespace)
		partial = true
	}
	if err != nil {
		return table.WorkloadPrinter(nil).Cells // no positions: the columns stay empty
	}
	pos := queueorder.TablePositions(pending)
	if partial {
		for k, p := range pos {
			p.InClusterQueue = -1
			pos[k] = p
		}
	}
	return table.WorkloadPrinter(pos).Cells
}
