package table

import (
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The resource.k8s.io kinds (DRA), as Kubernetes' printers
// (pkg/printers/internalversion): deviceclasses and resourceclaimtemplates
// NAME AGE, resourceclaims NAME STATE AGE, resourceslices NAME NODE DRIVER
// POOL AGE.

func resourceClaimPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("State", "A summary of the current state (allocated, pending, reserved, etc.)."),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			c := o.(*api.ResourceClaim)
			return []any{c.Name, ResourceClaimState(c), Age(now, c.CreationTimestamp.Time)}
		},
	}
}

// ResourceClaimState is the STATE column: "deleted" while being deleted,
// "pending" until allocated, then "allocated" and "reserved" while pods use
// it, joined with commas ("allocated,reserved"), as Kubernetes'
// resourceClaimState.
func ResourceClaimState(c *api.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	if c.Status.Allocation == nil {
		if c.DeletionTimestamp == nil {
			states = append(states, "pending")
		}
	} else {
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	}
	return strings.Join(states, ",")
}

func resourceSlicePrinter() Printer {
	doc := resourcev1.ResourceSliceSpec{}.SwaggerDoc()
	pool := resourcev1.ResourcePool{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Node", doc["nodeName"]),
			col("Driver", doc["driver"]),
			col("Pool", pool["name"]),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			s := o.(*api.ResourceSlice)
			node := "<none>"
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return []any{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, Age(now, s.CreationTimestamp.Time)}
		},
	}
}
