package table

import (
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The scheduling.k8s.io group's kinds, as Kubernetes' printers.

func priorityClassPrinter() Printer {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			typed(col("Value", doc["value"]), "integer"),
			typed(col("Global-Default", doc["globalDefault"]), "boolean"),
			ageColumn(),
			// Priority 0 in Kubernetes too: `kubectl get pc` shows it.
			col("PreemptionPolicy", doc["preemptionPolicy"]),
		},
		Cells: func(o api.Object, now time.Time) []any {
			pc := o.(*api.PriorityClass)
			policy := ""
			if pc.PreemptionPolicy != nil {
				policy = *pc.PreemptionPolicy
			}
			return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, Age(now, pc.CreationTimestamp.Time), policy}
		},
	}
}
