package apiserver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// # Shape keys
//
// A shape key is the SHA-256 of an encoding of values that no other values
// of their types have (appendKeyValue): two objects get one key only when
// every field their JSON encoding reads is the same, so their JSON is the
// same too. Admission remembers work by it that depends on an object's
// contents alone: the managedFields of a create (createfields.go), Pod
// Security's verdict on a pod (admission_podsecurity.go). Encoding with
// reflect by per-type plans costs about 0.6 of json.Marshal and its hash
// (BenchmarkCreateFieldsKey).

// shapeKey is a SHA-256 digest.
type shapeKey = [sha256.Size]byte

// keyBuilder appends the parts of a key; sum hashes them.
type keyBuilder struct {
	bp *[]byte
	b  []byte
	ok bool
}

func newKeyBuilder() *keyBuilder {
	bp := keyBuffers.Get().(*[]byte)
	return &keyBuilder{bp: bp, b: (*bp)[:0], ok: true}
}

// str appends s.
func (k *keyBuilder) str(s string) { k.b = appendKeyString(k.b, s) }

// value appends v (appendKeyValue).
func (k *keyBuilder) value(v any) {
	if !k.ok {
		return
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		k.b = append(k.b, 0)
		return
	}
	k.b, k.ok = appendKeyValue(k.b, rv, keyPlanOf(rv.Type()))
}

// sum returns the key, and false when a value could not be encoded; the
// builder is done.
func (k *keyBuilder) sum() (shapeKey, bool) {
	var key shapeKey
	if k.ok {
		key = sha256.Sum256(k.b)
	}
	*k.bp = k.b
	keyBuffers.Put(k.bp)
	return key, k.ok
}

// keyBuffers are createFieldsKey's scratch space.
var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// appendKeyValue appends an encoding of v (of plan's type, keyPlanOf) to
// b that no other value of its type has: two objects of one kind get the
// same bytes only when every field the JSON encoding reads is the same (a
// value with its own MarshalJSON, a Quantity or a Time, by that JSON), so
// their JSON is the same too. It is stricter than the JSON (a nil and an
// empty list differ) and quicker (BenchmarkCreateFieldsKey). It reports
// false for a value it cannot encode so (a MarshalJSON that fails, a map
// whose keys are not strings): such a create is not remembered.
func appendKeyValue(b []byte, v reflect.Value, plan *keyPlan) ([]byte, bool) {
	if plan.marshal == byValue && v.CanInterface() || plan.marshal == byPointer && v.CanAddr() && v.Addr().CanInterface() {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(b, 0), true
		}
		var m json.Marshaler
		if plan.marshal == byValue {
			m, _ = v.Interface().(json.Marshaler)
		} else {
			m, _ = v.Addr().Interface().(json.Marshaler)
		}
		js, err := m.MarshalJSON()
		if err != nil {
			return b, false
		}
		return appendKeyString(append(b, 1), string(js)), true
	}
	switch plan.kind {
	case reflect.String:
		return appendKeyString(b, v.String()), true
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1), true
		}
		return append(b, 0), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(b, v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.AppendUvarint(b, v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float())), true
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0), true
		}
		return appendKeyValue(append(b, 1), v.Elem(), plan.elem)
	case reflect.Struct:
		for _, f := range plan.fields {
			var ok bool
			if b, ok = appendKeyValue(b, v.Field(f.index), f.plan); !ok {
				return b, false
			}
		}
		return b, true
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0), true
		}
		if plan.elem.kind == reflect.Uint8 {
			return appendKeyString(append(b, 1), string(v.Bytes())), true
		}
		fallthrough
	case reflect.Array:
		b = binary.AppendUvarint(append(b, 1), uint64(v.Len()))
		for i := range v.Len() {
			var ok bool
			if b, ok = appendKeyValue(b, v.Index(i), plan.elem); !ok {
				return b, false
			}
		}
		return b, true
	case reflect.Map:
		if v.IsNil() {
			return append(b, 0), true
		}
		if v.Type().Key().Kind() != reflect.String {
			return b, false
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		b = binary.AppendUvarint(append(b, 1), uint64(len(keys)))
		for _, key := range keys {
			b = appendKeyString(b, key.String())
			var ok bool
			if b, ok = appendKeyValue(b, v.MapIndex(key), plan.elem); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false // interfaces, channels, functions: none in an API object
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// keyPlan is what appendKeyValue needs to know of a type, found once
// (keyPlanOf): a plan holds its parts' plans, so an object is encoded
// without a lookup past its root.
type keyPlan struct {
	kind reflect.Kind
	// marshal: the type's own MarshalJSON, on its value or its pointer.
	marshal int
	// fields are a struct's fields the JSON encoding reads: the exported
	// ones and the embedded, not tagged "-".
	fields []fieldPlan
	// elem is the plan of a pointer's, list's or map's elements.
	elem *keyPlan
}

type fieldPlan struct {
	index int
	plan  *keyPlan
}

const (
	byValue = 1 + iota
	byPointer
)

var keyPlans struct {
	sync.Mutex
	m map[reflect.Type]*keyPlan
}

// keyPlanOf returns t's plan, made once per type; a type that holds
// itself (a schema's properties) points back to its own plan.
func keyPlanOf(t reflect.Type) *keyPlan {
	keyPlans.Lock()
	defer keyPlans.Unlock()
	if keyPlans.m == nil {
		keyPlans.m = map[reflect.Type]*keyPlan{}
	}
	var build func(t reflect.Type) *keyPlan
	build = func(t reflect.Type) *keyPlan {
		if p, ok := keyPlans.m[t]; ok {
			return p
		}
		p := &keyPlan{kind: t.Kind()}
		keyPlans.m[t] = p
		switch {
		case t.Implements(jsonMarshaler):
			p.marshal = byValue
		case reflect.PointerTo(t).Implements(jsonMarshaler):
			p.marshal = byPointer
		}
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				if f := t.Field(i); (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" {
					p.fields = append(p.fields, fieldPlan{i, build(f.Type)})
				}
			}
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			p.elem = build(t.Elem())
		}
		return p
	}
	return build(t)
}

// appendKeyString appends s with its length before it.
func appendKeyString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
