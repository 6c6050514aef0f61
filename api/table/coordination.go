package table

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The coordination.k8s.io group's kinds, as Kubernetes' printers.

func leasePrinter() Printer {
	doc := coordinationv1.LeaseSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), col("Holder", doc["holderIdentity"]), ageColumn()},
		Cells: func(o api.Object, now time.Time) []any {
			l := o.(*api.Lease)
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, Age(now, l.CreationTimestamp.Time)}
		},
	}
}
