package table

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The discovery.k8s.io group's kinds, as Kubernetes' printers.

func endpointSlicePrinter() Printer {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("AddressType", doc["addressType"]),
			col("Ports", doc["ports"]),
			col("Endpoints", doc["endpoints"]),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			s := o.(*api.EndpointSlice)
			return []any{s.Name, s.AddressType, SlicePorts(s.Ports), SliceEndpoints(s.Endpoints), Age(now, s.CreationTimestamp.Time)}
		},
	}
}

// SlicePorts is kubectl's PORTS of an EndpointSlice: up to three port
// numbers ("*" for all ports, the name when it has no number), then
// " + N more..."; "<unset>" without ports.
func SlicePorts(ports []api.EndpointSlicePort) string {
	var list []string
	for _, p := range ports {
		s := "*"
		switch {
		case p.Port != nil:
			s = strconv.Itoa(int(*p.Port))
		case p.Name != nil:
			s = *p.Name
		}
		list = append(list, s)
	}
	return listWithMore(list)
}

// SliceEndpoints is kubectl's ENDPOINTS of an EndpointSlice: up to three
// addresses, ready or not, then " + N more..."; "<unset>" without any.
func SliceEndpoints(endpoints []api.Endpoint) string {
	var list []string
	for _, e := range endpoints {
		list = append(list, e.Addresses...)
	}
	return listWithMore(list)
}

// listWithMore is Kubernetes' listWithMoreString with max 3.
func listWithMore(list []string) string {
	const max = 3
	if len(list) > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ","), len(list)-max)
	}
	if len(list) == 0 {
		return "<unset>"
	}
	return strings.Join(list, ",")
}
