package podworker

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

// TestResourceValue: the downward API's resourceFieldRef values, rounded up
// as the kubelet does, and without overflow near the int64 bound.
func TestResourceValue(t *testing.T) {
	c := &api.Container{Resources: api.ResourceRequirements{
		Limits: api.ResourceList{
			api.ResourceCPU:    resource.MustParse("1500m"),
			api.ResourceMemory: resource.MustParse("9223372036854775807"),
		},
		Requests: api.ResourceList{api.ResourceMemory: resource.MustParse("64Mi")},
	}}
	q := func(s string) *api.Quantity { v := resource.MustParse(s); return &v }
	tests := []struct {
		name     string
		resource string
		divisor  *api.Quantity
		want     string
	}{
		{"cpu rounds up to cores", "limits.cpu", nil, "2"},
		{"cpu in millicores", "limits.cpu", q("1m"), "1500"},
		{"memory in bytes", "requests.memory", nil, "67108864"},
		{"memory in Mi", "requests.memory", q("1Mi"), "64"},
		{"largest memory", "limits.memory", nil, "9223372036854775807"},
		{"largest memory, divided and rounded up", "limits.memory", q("2"), "4611686018427387904"},
		{"not set", "requests.cpu", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resourceValue(c, &api.ResourceFieldSelector{Resource: tt.resource, Divisor: tt.divisor})
			if got != tt.want {
				t.Errorf("resourceValue(%s) = %q, want %q", tt.resource, got, tt.want)
			}
		})
	}
}
