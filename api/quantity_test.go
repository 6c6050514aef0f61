package api

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResourceAmount(t *testing.T) {
	tests := []struct {
		name, resource, q string
		want              int64
		ok                bool
	}{
		{"cpu in millicores", ResourceCPU, "250m", 250, true},
		{"whole cpus", ResourceCPU, "2", 2000, true},
		{"cpu rounds up to 1m", ResourceCPU, "0.1m", 1, true},
		{"memory in bytes", ResourceMemory, "64Mi", 64 << 20, true},
		{"gpus", ResourceNvidiaGPU, "8", 8, true},
		{"largest gpu count", ResourceNvidiaGPU, "9223372036854775807", math.MaxInt64, true},
		{"one more saturates", ResourceNvidiaGPU, "9223372036854775808", math.MaxInt64, false},
		{"largest cpu", ResourceCPU, "9223372036854775807m", math.MaxInt64, true},
		{"cpu past millicores saturates", ResourceCPU, "9223372036854776", math.MaxInt64, false},
		{"1e400 is not 0", ResourceNvidiaGPU, "1e400", math.MaxInt64, false},
		{"binary suffixes are capped at the largest by apimachinery", ResourceMemory, "9Ei", math.MaxInt64, true},
		{"-1e400", ResourceMemory, "-1e400", math.MinInt64, false},
		{"zero", ResourceMemory, "0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ResourceAmount(tt.resource, resource.MustParse(tt.q))
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ResourceAmount(%s, %s) = %d, %v; want %d, %v", tt.resource, tt.q, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestAddAmountsSaturates(t *testing.T) {
	tests := []struct {
		name       string
		a, b, want int64
	}{
		{"small", 2, 3, 5},
		{"negative", -2, 3, 1},
		{"2^62 + 2^62", 1 << 62, 1 << 62, math.MaxInt64},
		{"max + 1", math.MaxInt64, 1, math.MaxInt64},
		{"max + max", math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{"min + -1", math.MinInt64, -1, math.MinInt64},
		{"min + max", math.MinInt64, math.MaxInt64, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AddAmounts(tt.a, tt.b); got != tt.want {
				t.Errorf("AddAmounts(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
	subs := []struct {
		name       string
		a, b, want int64
	}{
		{"small", 5, 3, 2},
		{"min - 1", math.MinInt64, 1, math.MinInt64},
		{"0 - min", 0, math.MinInt64, math.MaxInt64},
		{"-1 - min", -1, math.MinInt64, math.MaxInt64},
		{"max - -1", math.MaxInt64, -1, math.MaxInt64},
	}
	for _, tt := range subs {
		t.Run("sub "+tt.name, func(t *testing.T) {
			if got := SubAmounts(tt.a, tt.b); got != tt.want {
				t.Errorf("SubAmounts(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestAddResourceLists(t *testing.T) {
	total := ResourceList{}
	for _, add := range []ResourceList{
		{ResourceCPU: resource.MustParse("250m"), ResourceMemory: resource.MustParse("64Mi"), ResourceNvidiaGPU: resource.MustParse("4611686018427387904")},
		{ResourceCPU: resource.MustParse("1"), ResourceMemory: resource.MustParse("64Mi"), ResourceNvidiaGPU: resource.MustParse("4611686018427387904")},
		{ResourceNvidiaGPU: resource.MustParse("1")},
	} {
		AddResourceLists(total, add)
	}
	want := map[string]string{ResourceCPU: "1250m", ResourceMemory: "128Mi", ResourceNvidiaGPU: "9223372036854775807"}
	for name, w := range want {
		q := total[name]
		if q.String() != w {
			t.Errorf("total %s = %s, want %s", name, q.String(), w)
		}
	}
}
