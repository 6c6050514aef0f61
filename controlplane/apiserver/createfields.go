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
	"time"

	"skiff.dev/skiff/api"
)

// # managedFields of a create, remembered by the object's shape
//
// On a create the field manager compares the new object with an empty one
// and records every field the object sets as the manager's (an Update
// entry: manager, apiVersion, the time, the field set). The field set
// depends on which fields are present, map keys, associative lists' key
// values and sets' values, never on the value of any other scalar; and the
// server-owned metadata skiff fills on every create (name, uid,
// resourceVersion, creationTimestamp) is stripped from it (the library's
// stripMetaManager), while generateName stays as a field whose value is
// not part of the set. So pods created from one template (a Deployment's,
// a Job's, a benchmark's) all get the same entry but for its time.
//
// createFields remembers the entries of recent creates keyed by the SHA-256
// of the manager, the kind and the object with exactly those five values
// (where set) replaced by a placeholder (appendKeyValue: every field the
// JSON encoding reads, so two objects of a key have the same JSON): every
// other value is part of the key, so two objects share an entry only when
// their Kubernetes forms (a function of that JSON: toTyped is its round
// trip) differ in nothing but those values. A hit copies the entry with the time of now,
// as the field manager sets it. Only the plain create is remembered: one
// whose request carries no managedFields (the field manager starts from
// those) and whose object the library could read.
// TestCreateFieldsAreTheFieldManagers proves a hit equal to the field
// manager on random objects of every kind.

// createFieldsGeneration bounds the cache: it holds at most two
// generations of this many entries (each a digest and an entry's few
// hundred bytes); when the current one fills, the older is dropped.
const createFieldsGeneration = 256

// fieldsKey is a create's key: a SHA-256 digest.
type fieldsKey = [sha256.Size]byte

// createFields is the process's cache of create entries.
var createFields = &createFieldsCache{}

// createFieldsCache is a bounded map, safe for concurrent use, that keeps
// what was used recently: a hit in the older generation moves to the
// current one.
type createFieldsCache struct {
	mu        sync.Mutex
	cur, prev map[fieldsKey][]api.ManagedFieldsEntry
}

func (c *createFieldsCache) get(key fieldsKey) ([]api.ManagedFieldsEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[key]; ok {
		return e, true
	}
	e, ok := c.prev[key]
	if ok {
		c.putLocked(key, e)
	}
	return e, ok
}

func (c *createFieldsCache) put(key fieldsKey, e []api.ManagedFieldsEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, e)
}

func (c *createFieldsCache) putLocked(key fieldsKey, e []api.ManagedFieldsEntry) {
	if len(c.cur) >= createFieldsGeneration {
		c.prev, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[fieldsKey][]api.ManagedFieldsEntry, createFieldsGeneration)
	}
	c.cur[key] = e
}

// createFieldsPlaceholder stands for a server-owned metadata value in a key.
const createFieldsPlaceholder = "\x00"

// createFieldsKey is the cache key of a create of obj (kind k) by manager,
// and false where the create is not the plain case: managedFields in the
// request, or an object whose JSON fails. It changes obj's metadata while
// it reads it and puts it back.
func createFieldsKey(k *api.Kind, manager string, obj api.Object) (fieldsKey, bool) {
	m := obj.GetObjectMeta()
	if m.ManagedFields != nil {
		return fieldsKey{}, false
	}
	ct := m.CreationTimestamp
	if y := ct.UTC().Year(); !ct.IsZero() && (y < 0 || y > 9999) {
		return fieldsKey{}, false // its JSON fails: the library never sees the object
	}
	saved := *m
	placeholder := func(s *string) {
		if *s != "" {
			*s = createFieldsPlaceholder
		}
	}
	placeholder(&m.Name)
	placeholder(&m.GenerateName)
	placeholder(&m.UID)
	placeholder(&m.ResourceVersion)
	if !ct.IsZero() {
		m.CreationTimestamp = api.Time{Time: time.Unix(0, 0).UTC()}
	}
	bp := keyBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range []string{manager, k.Group, k.Version, k.Kind} {
		b = appendKeyString(b, s)
	}
	v := reflect.ValueOf(obj)
	b, ok := appendKeyValue(b, v, keyPlanOf(v.Type()))
	*m = saved
	var key fieldsKey
	if ok {
		key = sha256.Sum256(b)
	}
	*bp = b
	keyBuffers.Put(bp)
	return key, ok
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

// withTimeNow copies entries, each with a time set to now as
// setManagedFields writes the field manager's (whole seconds, UTC).
func withTimeNow(entries []api.ManagedFieldsEntry) []api.ManagedFieldsEntry {
	if entries == nil {
		return nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	out := make([]api.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		out[i] = e
		if e.Time != nil {
			out[i].Time = &api.Time{Time: now}
		}
		if e.FieldsV1 != nil {
			out[i].FieldsV1 = append(json.RawMessage(nil), e.FieldsV1...)
		}
	}
	return out
}
