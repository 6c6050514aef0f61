package table

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// ResourceQuota and LimitRange, as Kubernetes prints them: a quota's
// enforced resources (status.hard) as "NAME: USED/HARD", limits.* in the
// LIMIT column and the rest in REQUEST (printResourceQuota); a limit range
// has no printer of its own, so kube-apiserver's default table: NAME and
// CREATED AT.

func resourceQuotaPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
			col("Limit", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			q := o.(*api.ResourceQuota)
			var request, limit []string
			names := make([]string, 0, len(q.Status.Hard))
			for name := range q.Status.Hard {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				used, hard := q.Status.Used[name], q.Status.Hard[name]
				cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
				if pieces := strings.Split(name, "."); len(pieces) > 1 && pieces[0] == "limits" {
					limit = append(limit, cell)
				} else {
					request = append(request, cell)
				}
			}
			return []any{q.Name, strings.Join(request, ", "), strings.Join(limit, ", "), Age(now, q.CreationTimestamp.Time)}
		},
	}
}

func limitRangePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		},
		Cells: func(o api.Object, _ time.Time) []any {
			m := o.GetObjectMeta()
			return []any{m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339)}
		},
	}
}
