package table

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// podGroupPrinter is the PodGroup CRD's additionalPrinterColumns
// (scheduler-plugins' config/crd/bases/scheduling.x-k8s.io_podgroups.yaml):
// NAME PHASE MINMEMBER RUNNING SUCCEEDED FAILED AGE. A field the object
// leaves out (a zero count, omitted) is an empty cell, as the API server's
// CRD table convertor gives kubectl; Age is the CRD's "date" column.
func podGroupPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Phase", "Current phase of PodGroup."),
			typed(col("MinMember", "MinMember defines the minimal number of members/tasks to run the pod group."), "integer"),
			typed(col("Running", "The number of actively running pods."), "integer"),
			typed(col("Succeeded", "The number of pods which reached phase Succeeded."), "integer"),
			typed(col("Failed", "The number of pods which reached phase Failed."), "integer"),
			typed(col("Age", "Age is the time PodGroup was created."), "date"),
		},
		Cells: func(o api.Object, now time.Time) []any {
			pg := o.(*api.PodGroup)
			var phase any
			if pg.Status.Phase != "" {
				phase = pg.Status.Phase
			}
			return []any{pg.Name, phase, omitZero(pg.Spec.MinMember), omitZero(pg.Status.Running),
				omitZero(pg.Status.Succeeded), omitZero(pg.Status.Failed), Age(now, pg.CreationTimestamp.Time)}
		},
	}
}

// omitZero is nil for 0 (a field JSON leaves out) and the int64 otherwise.
func omitZero(v int32) any {
	if v == 0 {
		return nil
	}
	return int64(v)
}
