package table

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The kueue.x-k8s.io kinds, as Kueue's CRDs print them
// (+kubebuilder:printcolumn). As for every custom resource, only the
// columns a CRD names are shown: ClusterQueues and LocalQueues have no AGE.
// ResourceFlavor and Topology name none: NAME AGE.

func clusterQueuePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Cohort", "Cohort that this ClusterQueue belongs to"),
			wideCol("Strategy", "The queueing strategy used to prioritize workloads"),
			typed(col("Pending Workloads", "Number of pending workloads"), "integer"),
			typed(wideCol("Admitted Workloads", "Number of admitted workloads that haven't finished yet"), "integer"),
		},
		Cells: func(o api.Object, _ time.Time) []any {
			cq := o.(*api.ClusterQueue)
			return []any{cq.Name, cq.Spec.CohortName, cq.Spec.QueueingStrategy, int64(cq.Status.PendingWorkloads), int64(cq.Status.AdmittedWorkloads)}
		},
	}
}

func localQueuePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("ClusterQueue", "Backing ClusterQueue"),
			typed(col("Pending Workloads", "Number of pending workloads"), "integer"),
			typed(col("Admitted Workloads", "Number of admitted workloads that haven't finished yet."), "integer"),
		},
		Cells: func(o api.Object, _ time.Time) []any {
			lq := o.(*api.LocalQueue)
			return []any{lq.Name, lq.Spec.ClusterQueue, int64(lq.Status.PendingWorkloads), int64(lq.Status.AdmittedWorkloads)}
		},
	}
}

// WorkloadPosition is a pending workload's place in its queues, counted
// from 0 as Kueue's visibility API (controlplane/kueue/queueorder); a
// negative InClusterQueue is unknown (printed empty: a reader of one
// namespace cannot see the rest of the ClusterQueue).
type WorkloadPosition struct{ InClusterQueue, InLocalQueue int32 }

// WorkloadPrinter is the workloads' printer with the positions of the
// pending ones, by "namespace/name": beyond Kueue, -o wide adds POSITION
// IN CLUSTERQUEUE and POSITION IN LOCALQUEUE (empty for a workload that is
// not pending, or when positions are unknown).
func WorkloadPrinter(positions map[string]WorkloadPosition) Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Queue", "Name of the queue this workload was submitted to"),
			col("Reserved in", "Name of the ClusterQueue where the workload is reserving quota"),
			col("Admitted", "Admission status"),
			col("Finished", "Workload finished"),
			{Name: "Age", Type: "date", Description: "Time this workload was created"},
			wideCol("Position in ClusterQueue", "Position of a pending workload in its ClusterQueue, from 0 (skiff)"),
			wideCol("Position in LocalQueue", "Position of a pending workload in its LocalQueue, from 0 (skiff)"),
		},
		Cells: func(o api.Object, now time.Time) []any {
			wl := o.(*api.Workload)
			reserved := ""
			if wl.Status.Admission != nil {
				reserved = wl.Status.Admission.ClusterQueue
			}
			status := func(t string) string {
				if c := apimeta.FindStatusCondition(wl.Status.Conditions, t); c != nil {
					return string(c.Status)
				}
				return ""
			}
			var inCQ, inLQ any = "", ""
			if p, ok := positions[wl.Namespace+"/"+wl.Name]; ok {
				inCQ, inLQ = int64(p.InClusterQueue), int64(p.InLocalQueue)
				if p.InClusterQueue < 0 {
					inCQ = ""
				}
			}
			return []any{wl.Name, wl.Spec.QueueName, reserved, status(api.WorkloadAdmitted), status(api.WorkloadFinished),
				Age(now, wl.CreationTimestamp.Time), inCQ, inLQ}
		},
	}
}

func workloadPrinter() Printer { return WorkloadPrinter(nil) }
