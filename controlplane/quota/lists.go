package quota

import (
	"slices"
	"strings"

	"skiff.dev/skiff/api"
)

// Resource list arithmetic, as k8s.io/apiserver/pkg/quota/v1 (on skiff's
// ResourceList; that package would bring the admission and audit
// machinery along). Quantities add exactly: a sum too large for an int64
// is kept as a decimal, never wrapped. Lists passed in are not changed.

// Add returns a + b.
func Add(a, b api.ResourceList) api.ResourceList {
	out := make(api.ResourceList, len(a)+len(b))
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Add(o)
		}
		out[k] = q
	}
	for k, v := range b {
		if _, ok := out[k]; !ok {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// addMasked adds b's entries named in names into a, in place: a becomes
// Add(a, Mask(b, names)) without a new list for every addition (the
// controller sums a namespace's objects one by one). a owns its values:
// an entry is copied when it first goes in.
func addMasked(a, b api.ResourceList, names []string) {
	for _, n := range names {
		if v, ok := b[n]; ok {
			addInto(a, n, v)
		}
	}
}

// addInto adds v to a's entry n, in place. a owns its values: an entry is
// copied when it first goes in.
func addInto(a api.ResourceList, n string, v api.Quantity) {
	if cur, ok := a[n]; ok {
		cur.Add(v)
		a[n] = cur
	} else {
		a[n] = v.DeepCopy()
	}
}

// SubtractNonNegative returns a - b, never below zero per resource
// (Kubernetes' SubtractWithNonNegativeResult).
func SubtractNonNegative(a, b api.ResourceList) api.ResourceList {
	out := make(api.ResourceList, len(a))
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Sub(o)
		}
		if q.Sign() < 0 {
			q.Set(0)
		}
		out[k] = q
	}
	for k, v := range b {
		if _, ok := out[k]; !ok {
			z := v.DeepCopy()
			z.Set(0)
			out[k] = z
		}
	}
	return out
}

// Mask returns the entries of a named in names.
func Mask(a api.ResourceList, names []string) api.ResourceList {
	out := api.ResourceList{}
	for _, n := range names {
		if q, ok := a[n]; ok {
			out[n] = q.DeepCopy()
		}
	}
	return out
}

// Names returns a list's resource names, sorted.
func Names(a api.ResourceList) []string {
	out := make([]string, 0, len(a))
	for k := range a {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// exceeds returns, sorted, the names of requested whose used + requested
// is above hard (a name hard lacks is not capped), without building the
// sum as a list.
func exceeds(used, requested, hard api.ResourceList) []string {
	var out []string
	for _, n := range Names(requested) {
		h, ok := hard[n]
		if !ok {
			continue
		}
		sum := requested[n].DeepCopy()
		if u, ok := used[n]; ok {
			sum.Add(u)
		}
		if sum.Cmp(h) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Equal reports whether a and b hold the same quantities.
func Equal(a, b api.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		o, ok := b[k]
		if !ok || v.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// RemoveZeros returns a without its zero entries.
func RemoveZeros(a api.ResourceList) api.ResourceList {
	out := api.ResourceList{}
	for k, v := range a {
		if !v.IsZero() {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// negative returns the names of a's negative entries.
func negative(a api.ResourceList) []string {
	var out []string
	for _, k := range Names(a) {
		if q := a[k]; q.Sign() < 0 {
			out = append(out, k)
		}
	}
	return out
}

// PrettyPrint is Kubernetes' prettyPrint: "name=quantity" pairs sorted by
// name, comma separated.
func PrettyPrint(a api.ResourceList) string {
	parts := make([]string, 0, len(a))
	for _, k := range Names(a) {
		q := a[k]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ",")
}
