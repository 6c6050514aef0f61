package table

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The policy group (policy/v1), as Kubernetes' printPodDisruptionBudget.

func podDisruptionBudgetPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Min Available", "The minimum number or percentage of available pods this budget requires."),
			col("Max Unavailable", "The maximum number or percentage of unavailable pods this budget requires."),
			typed(col("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time."), "integer"),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			p := o.(*api.PodDisruptionBudget)
			orNA := func(v *api.IntOrString) string {
				if v == nil {
					return "N/A"
				}
				return v.String()
			}
			return []any{p.Name, orNA(p.Spec.MinAvailable), orNA(p.Spec.MaxUnavailable), int64(p.Status.DisruptionsAllowed), Age(now, p.CreationTimestamp.Time)}
		},
	}
}
