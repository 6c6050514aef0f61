package api

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// # Amounts
//
// A Quantity is an arbitrary-precision decimal: "1e400" parses, and its
// Value() is 0; "9223372036854775808" parses, and its Value() wraps to a
// negative number. Whatever counts resources (the scheduler, describe node,
// the agent's device manager) works instead with amounts: an int64 in the
// unit skiff counts the resource in (millicores for cpu, whole units for
// everything else: bytes, pods, devices), converted by ResourceAmount and
// added by AddAmounts, which saturate at the int64 bounds instead of
// wrapping. Validation rejects every resource quantity whose amount does not
// fit (validateResourceQuantity), and a pod whose containers' total does not,
// so saturation is a safety net, never the normal case.

// ResourceAmount is q in the unit skiff counts resource name in: millicores
// for cpu, whole units (rounded up) for every other resource. ok is false
// when q does not fit an int64 in that unit; the amount is then
// math.MaxInt64 (or math.MinInt64 for a negative q), never a wrapped value.
func ResourceAmount(name string, q Quantity) (amount int64, ok bool) {
	scale := amountScale(name)
	if q.Cmp(maxAmount(scale)) > 0 {
		return math.MaxInt64, false
	}
	if q.Cmp(minAmount(scale)) < 0 {
		return math.MinInt64, false
	}
	return q.ScaledValue(scale), true
}

// AmountQuantity is the Quantity of an amount of resource name (the inverse
// of ResourceAmount), in format f (DecimalSI when f is empty).
func AmountQuantity(name string, amount int64, f resource.Format) Quantity {
	if f == "" {
		f = resource.DecimalSI
	}
	q := resource.NewScaledQuantity(amount, amountScale(name))
	q.Format = f
	return *q
}

// AddAmounts returns a+b, saturated at math.MaxInt64 and math.MinInt64.
func AddAmounts(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// MulAmounts returns a*b for non-negative a and b, saturated at
// math.MaxInt64.
func MulAmounts(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// SubAmounts returns a-b, saturated like AddAmounts.
func SubAmounts(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b // cannot overflow: a < 0
	}
	return AddAmounts(a, -b)
}

// AddResourceLists adds every quantity of add into into, by amounts
// (ResourceAmount, AddAmounts): a total never wraps, it stops at the
// largest amount. A new entry takes the format of the quantity added.
func AddResourceLists(into, add ResourceList) {
	for name, q := range add {
		b, _ := ResourceAmount(name, q)
		f := q.Format
		cur, had := into[name]
		if had {
			a, _ := ResourceAmount(name, cur)
			b = AddAmounts(a, b)
			f = cur.Format
		}
		into[name] = AmountQuantity(name, b, f)
	}
}

func amountScale(name string) resource.Scale {
	if name == ResourceCPU {
		return resource.Milli
	}
	return 0
}

var (
	// Bounds of an amount, by unit; never modified.
	maxUnits, maxMillis = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI), *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	minUnits, minMillis = *resource.NewQuantity(math.MinInt64, resource.DecimalSI), *resource.NewMilliQuantity(math.MinInt64, resource.DecimalSI)
)

func maxAmount(s resource.Scale) Quantity {
	if s == resource.Milli {
		return maxMillis
	}
	return maxUnits
}

func minAmount(s resource.Scale) Quantity {
	if s == resource.Milli {
		return minMillis
	}
	return minUnits
}

// validateResourceQuantity checks one quantity of resource name as
// Kubernetes' ValidateResourceQuantityValue does (not negative; a whole
// number for extended resources) and, stricter than Kubernetes (which takes
// "1e400" and counts it as 0), that its amount fits: at most
// 9223372036854775807 units, or 9223372036854775807m of cpu.
func validateResourceQuantity(name string, q Quantity, path string) FieldErrors {
	if q.Sign() < 0 {
		return FieldErrors{Invalid(path, q.String(), "must be greater than or equal to 0")}
	}
	if _, ok := ResourceAmount(name, q); !ok {
		return FieldErrors{Invalid(path, q.String(), fmt.Sprintf("must be less than or equal to %s", maxQuantityString(name)))}
	}
	if isExtendedResource(name) && !isWhole(q) {
		return FieldErrors{Invalid(path, q.String(), "must be an integer")}
	}
	return nil
}

// maxQuantityString is the largest quantity of resource name skiff takes.
func maxQuantityString(name string) string {
	m := maxAmount(amountScale(name))
	return m.String()
}

// isWhole reports whether q is a whole number, exactly (Kubernetes'
// MilliValue()%1000 check wraps for large values).
func isWhole(q Quantity) bool {
	_, exact := q.AsScale(0)
	return exact
}
