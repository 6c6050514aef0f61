package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// deepCopy copies what src holds into dst (a settable value of src's type)
// without sharing anything dst's holder could change: pointers, slices and
// maps are new, strings and scalars copied. It is what Clone used to do
// with a JSON round trip (encode, then decode into a new object), at a
// fraction of the cost and without its garbage: Kubernetes' answer is
// generated DeepCopy methods, this is the same walk driven by reflect,
// with one copier built per type and cached.
//
// For an object that came from JSON (anything read from the store, a
// cache or a request), the copy equals the JSON round trip's; for one
// built in memory it keeps what the round trip would have normalised
// (sub-second times, an empty but non-nil slice, a pointer to a zero
// value under omitempty). TestCloneMatchesJSONRoundTrip checks both.
func deepCopy(dst, src reflect.Value) { copierFor(src.Type())(dst, src) }

type copier func(dst, src reflect.Value)

var (
	copiers     sync.Map // reflect.Type → copier
	stdTimeType = reflect.TypeFor[time.Time]()
)

// copierFor returns t's copier, building it once.
func copierFor(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	copiersMu.Lock()
	defer copiersMu.Unlock()
	return copierLocked(t)
}

var (
	copiersMu sync.Mutex
	// building: the copiers being built (copiersMu), for a recursive
	// type (a struct holding a pointer to its own type).
	building = map[reflect.Type]*copier{}
)

// copierLocked is copierFor with copiersMu held; only a finished copier
// is ever published in copiers.
func copierLocked(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	if p, ok := building[t]; ok {
		return func(dst, src reflect.Value) { (*p)(dst, src) }
	}
	p := new(copier)
	building[t] = p
	*p = buildCopier(t)
	delete(building, t)
	copiers.Store(t, *p)
	return *p
}

func assign(dst, src reflect.Value) { dst.Set(src) }

func buildCopier(t reflect.Type) copier {
	if !holdsReferences(t) {
		return assign
	}
	switch t.Kind() {
	case reflect.Pointer:
		elem := copierLocked(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			p := reflect.New(t.Elem())
			elem(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Slice:
		if !holdsReferences(t.Elem()) {
			return func(dst, src reflect.Value) {
				if src.IsNil() {
					dst.SetZero()
					return
				}
				s := reflect.MakeSlice(t, src.Len(), src.Len())
				reflect.Copy(s, src)
				dst.Set(s)
			}
		}
		elem := copierLocked(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			n := src.Len()
			s := reflect.MakeSlice(t, n, n)
			for i := range n {
				elem(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Array:
		elem := copierLocked(t.Elem())
		return func(dst, src reflect.Value) {
			for i := range t.Len() {
				elem(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		key, elem := copierLocked(t.Key()), copierLocked(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			m := reflect.MakeMapWithSize(t, src.Len())
			k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			for it := src.MapRange(); it.Next(); {
				key(k, it.Key())
				elem(v, it.Value())
				m.SetMapIndex(k, v)
			}
			dst.Set(m)
		}
	case reflect.Interface:
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				dst.SetZero()
				return
			}
			v := src.Elem()
			c := reflect.New(v.Type()).Elem()
			copierFor(v.Type())(c, v)
			dst.Set(c)
		}
	case reflect.Struct:
		return structCopier(t)
	}
	panic(fmt.Sprintf("api: cannot copy a %s", t))
}

// structCopier copies a struct: the whole value first (scalars and
// unexported fields), then each exported field that holds references.
// A struct with an unexported field holding references (a library's
// type) is copied by its DeepCopy method when it has one (k8s.io's
// Quantity), else by the JSON round trip Clone used before.
func structCopier(t reflect.Type) copier {
	if m, ok := t.MethodByName("DeepCopy"); ok && m.Type.NumIn() == 1 && m.Type.NumOut() == 1 && m.Type.Out(0) == t {
		return func(dst, src reflect.Value) { dst.Set(src.Method(m.Index).Call(nil)[0]) }
	}
	type field struct {
		i int
		c copier
	}
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		if !holdsReferences(f.Type) {
			continue
		}
		if !f.IsExported() {
			return jsonCopier(t)
		}
		fields = append(fields, field{i, copierLocked(f.Type)})
	}
	return func(dst, src reflect.Value) {
		dst.Set(src)
		for _, f := range fields {
			f.c(dst.Field(f.i), src.Field(f.i))
		}
	}
}

// jsonCopier copies through JSON, as Clone did for everything.
func jsonCopier(t reflect.Type) copier {
	return func(dst, src reflect.Value) {
		b, err := json.Marshal(src.Interface())
		if err != nil {
			panic(fmt.Sprintf("clone %s: %v", t, err))
		}
		p := reflect.New(t)
		if err := json.Unmarshal(b, p.Interface()); err != nil {
			panic(fmt.Sprintf("clone %s: %v", t, err))
		}
		dst.Set(p.Elem())
	}
}

// holdsReferences reports whether a value of t can share memory with its
// copy after a plain assignment: pointers, slices, maps, interfaces, or a
// struct or array of them. time.Time's location pointer is shared as
// everyone shares it (a Location is never changed).
func holdsReferences(t reflect.Type) bool {
	if v, ok := refCache.Load(t); ok {
		return v.(bool)
	}
	r := holdsReferencesUncached(t, map[reflect.Type]bool{})
	refCache.Store(t, r)
	return r
}

var refCache sync.Map // reflect.Type → bool

func holdsReferencesUncached(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == stdTimeType {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return holdsReferencesUncached(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return false
		}
		seen[t] = true
		for i := range t.NumField() {
			if holdsReferencesUncached(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}
