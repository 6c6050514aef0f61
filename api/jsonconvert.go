package api

import (
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConvertJSON fills dst (a pointer to a zero value) with what
// json.Unmarshal(json.Marshal(src)) would give it, without the JSON in
// between: skiff's types carry Kubernetes' JSON names, so this is how a
// skiff object becomes its k8s.io/api type (managedFields, Pod Security)
// at a fraction of the round trip's cost. Fields are matched by JSON name
// as encoding/json matches them (an exact name, else one equal but for
// case); what dst has no field for is dropped; omitempty fields that are
// empty and null values leave dst's zero value. Anything whose JSON
// encoding/json does not write field by field (a MarshalJSON or
// UnmarshalJSON method, text marshalers, ",string", embedded pointers, two
// fields of one name, kinds that differ) goes through a JSON round trip of
// that value alone, so the result, and whether it fails, is the whole
// round trip's (TestConvertJSONIsTheRoundTrip).
func ConvertJSON(dst, src any) error {
	d := reflect.ValueOf(dst)
	if d.Kind() != reflect.Pointer || d.IsNil() {
		return errors.New("convert: dst must be a non-nil pointer")
	}
	s := reflect.ValueOf(src)
	if !s.IsValid() {
		return json.Unmarshal([]byte("null"), dst)
	}
	return convertValue(converterFor(s.Type(), d.Type().Elem()), d.Elem(), s)
}

// convertValue fills dst from src with c. A src that encodes as null
// leaves dst as it is (zero), unless c is the round trip (a type with an
// UnmarshalJSON method is given the null).
func convertValue(c *convPlan, dst, src reflect.Value) error {
	if !c.custom && nullJSON(src) {
		return nil
	}
	return c.fill(dst, src)
}

// converter fills dst (settable, zero) from src, which does not encode as
// null (convertValue leaves dst zero then) unless it has a marshaler.
type converter func(dst, src reflect.Value) error

// convPlan is the converter of one pair of types; custom when it is the
// round trip of the value.
type convPlan struct {
	fill   converter
	custom bool
}

type typePair struct{ src, dst reflect.Type }

var (
	converters   sync.Map // typePair → converter
	convertersMu sync.Mutex
	// convBuilding: the converters being built (convertersMu), for
	// recursive types.
	convBuilding = map[typePair]*convPlan{}

	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	errConvertFloat = errors.New("json: unsupported value: NaN or infinite float")
)

func converterFor(src, dst reflect.Type) *convPlan {
	p := typePair{src, dst}
	if c, ok := converters.Load(p); ok {
		return c.(*convPlan)
	}
	convertersMu.Lock()
	defer convertersMu.Unlock()
	return converterLocked(src, dst)
}

func converterLocked(src, dst reflect.Type) *convPlan {
	p := typePair{src, dst}
	if c, ok := converters.Load(p); ok {
		return c.(*convPlan)
	}
	if b, ok := convBuilding[p]; ok {
		return b // recursive: filled in before it is used
	}
	b := &convPlan{custom: customJSON(src, false) || customJSON(dst, true)}
	if c, ok := timeConverter(src, dst); ok {
		b.custom, b.fill = false, c
		converters.Store(p, b)
		return b
	}
	convBuilding[p] = b
	b.fill = buildConverter(src, dst)
	delete(convBuilding, p)
	converters.Store(p, b)
	return b
}

// viaJSON is the round trip of one value: what the whole object's round
// trip does with it, since encoding/json writes and reads a value the same
// wherever it sits.
func viaJSON(dst, src reflect.Value) error {
	v := src.Interface()
	if src.CanAddr() { // as in the whole object: a pointer method's MarshalJSON is used
		v = src.Addr().Interface()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst.Addr().Interface())
}

// customJSON reports whether encoding/json treats t (or what it points
// to) other than field by field when writing (src) or reading (dst).
func customJSON(t reflect.Type, dst bool) bool {
	for {
		if dst {
			if t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) ||
				reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
				return true
			}
		} else if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
			reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
			return true
		}
		if t.Kind() != reflect.Pointer {
			return false
		}
		t = t.Elem()
	}
}

var (
	apiTimeType  = reflect.TypeFor[Time]()
	kubeTimeType = reflect.TypeFor[metav1.Time]()
)

// timeConverter converts a Time (or *Time) to Kubernetes' metav1.Time (or
// pointer) as its JSON does: null when zero, else RFC 3339 in whole seconds,
// read back in the local zone (metav1.Time's UnmarshalJSON).
func timeConverter(src, dst reflect.Type) (converter, bool) {
	sp, dp := src.Kind() == reflect.Pointer, dst.Kind() == reflect.Pointer
	st, dt := src, dst
	if sp {
		st = src.Elem()
	}
	if dp {
		dt = dst.Elem()
	}
	if st != apiTimeType || dt != kubeTimeType {
		return nil, false
	}
	return func(d, s reflect.Value) error {
		v := s
		if sp {
			if v.IsNil() {
				return nil
			}
			v = v.Elem()
		}
		t := v.Interface().(Time)
		if t.IsZero() {
			return nil // null
		}
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return viaJSON(d, s) // RFC 3339 has no such years: the round trip fails
		}
		kt := reflect.ValueOf(metav1.Time{Time: time.Unix(t.Unix(), 0)})
		if dp {
			p := reflect.New(dt)
			p.Elem().Set(kt)
			kt = p
		}
		d.Set(kt)
		return nil
	}, true
}

func buildConverter(src, dst reflect.Type) converter {
	if customJSON(src, false) || customJSON(dst, true) {
		return viaJSON
	}
	if dst.Kind() == reflect.Pointer {
		if src.Kind() == reflect.Pointer {
			// A pointer to a pointer is rare enough for the round trip, and
			// one to a nil slice or map is null.
			if nullable(src.Elem().Kind()) || dst.Elem().Kind() == reflect.Pointer {
				return viaJSON
			}
			elem := converterLocked(src.Elem(), dst.Elem())
			return func(d, s reflect.Value) error { // s is not nil
				p := reflect.New(dst.Elem())
				d.Set(p)
				return elem.fill(p.Elem(), s.Elem())
			}
		}
		if nullable(src.Kind()) {
			return viaJSON // a nil slice or map would be null: the pointer stays nil
		}
		elem := converterLocked(src, dst.Elem())
		return func(d, s reflect.Value) error {
			p := reflect.New(dst.Elem())
			d.Set(p)
			return elem.fill(p.Elem(), s)
		}
	}
	if src.Kind() == reflect.Pointer {
		if nullable(src.Elem().Kind()) {
			return viaJSON
		}
		elem := converterLocked(src.Elem(), dst)
		return func(d, s reflect.Value) error { return elem.fill(d, s.Elem()) } // s is not nil
	}
	switch {
	case src.Kind() == reflect.String && dst.Kind() == reflect.String:
		return func(d, s reflect.Value) error {
			str := s.String()
			if !utf8.ValidString(str) {
				return viaJSON(d, s) // invalid bytes become U+FFFD, one each
			}
			d.SetString(str)
			return nil
		}
	case src.Kind() == reflect.Bool && dst.Kind() == reflect.Bool:
		return func(d, s reflect.Value) error { d.SetBool(s.Bool()); return nil }
	case isInt(src.Kind()) && src.Kind() == dst.Kind():
		return func(d, s reflect.Value) error { d.SetInt(s.Int()); return nil }
	case isUint(src.Kind()) && src.Kind() == dst.Kind():
		return func(d, s reflect.Value) error { d.SetUint(s.Uint()); return nil }
	case (src.Kind() == reflect.Float64 || src.Kind() == reflect.Float32) && src.Kind() == dst.Kind():
		return func(d, s reflect.Value) error {
			f := s.Float()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return errConvertFloat
			}
			d.SetFloat(f) // the shortest form that reads back as f
			return nil
		}
	case src.Kind() == reflect.Slice && dst.Kind() == reflect.Slice:
		return sliceConverter(src, dst)
	case src.Kind() == reflect.Map && dst.Kind() == reflect.Map:
		if src.Key().Kind() != reflect.String || dst.Key().Kind() != reflect.String ||
			src.Key().Implements(textMarshaler) || reflect.PointerTo(dst.Key()).Implements(textUnmarshaler) {
			return viaJSON
		}
		elem := converterLocked(src.Elem(), dst.Elem())
		return func(d, s reflect.Value) error {
			m := reflect.MakeMapWithSize(dst, s.Len())
			d.Set(m)
			k := reflect.New(dst.Key()).Elem()
			for it := s.MapRange(); it.Next(); {
				key := it.Key().String()
				if !utf8.ValidString(key) {
					d.SetZero()
					return viaJSON(d, s)
				}
				k.SetString(key)
				v := reflect.New(dst.Elem()).Elem()
				if err := convertValue(elem, v, it.Value()); err != nil {
					return err
				}
				m.SetMapIndex(k, v)
			}
			return nil
		}
	case src.Kind() == reflect.Struct && dst.Kind() == reflect.Struct:
		return structConverter(src, dst)
	}
	return viaJSON // interfaces, arrays, kinds that differ
}

func sliceConverter(src, dst reflect.Type) converter {
	if src.Elem().Kind() == reflect.Uint8 || dst.Elem().Kind() == reflect.Uint8 {
		if src.Elem().Kind() != reflect.Uint8 || dst.Elem().Kind() != reflect.Uint8 ||
			customJSON(src.Elem(), false) || customJSON(dst.Elem(), true) {
			return viaJSON
		}
		return func(d, s reflect.Value) error { // base64 and back
			b := reflect.MakeSlice(dst, s.Len(), s.Len())
			copy(b.Bytes(), s.Bytes())
			d.Set(b)
			return nil
		}
	}
	elem := converterLocked(src.Elem(), dst.Elem())
	return func(d, s reflect.Value) error {
		n := s.Len()
		out := reflect.MakeSlice(dst, n, n)
		d.Set(out)
		for i := range n {
			if err := convertValue(elem, out.Index(i), s.Index(i)); err != nil {
				return err
			}
		}
		return nil
	}
}

func nullable(k reflect.Kind) bool {
	return k == reflect.Pointer || k == reflect.Slice || k == reflect.Map || k == reflect.Interface
}

// nullJSON reports whether v encodes as null without a marshaler of its
// own: a nil pointer, slice, map or interface.
func nullJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return v.IsNil()
	}
	return false
}

func isInt(k reflect.Kind) bool {
	return k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 || k == reflect.Uint64 || k == reflect.Uintptr
}

// convField is one JSON field of a struct: its name, where it is (through
// embedded structs), and whether it is left out when empty.
type convField struct {
	name      string
	index     []int
	typ       reflect.Type
	omitEmpty bool
}

// convFields lists t's JSON fields as encoding/json does, or ok false when
// the struct needs rules this walk does not follow (two fields of one
// name at any depth, an embedded pointer, ",string", and for a source
// omitzero, which only writing heeds).
func convFields(t reflect.Type, src bool) (fields []convField, ok bool) {
	var walk func(t reflect.Type, index []int) bool
	walk = func(t reflect.Type, index []int) bool {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			if f.Anonymous {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					return false
				}
				if name == "" && ft.Kind() == reflect.Struct {
					if !walk(ft, idx) {
						return false
					}
					continue
				}
				if !f.IsExported() {
					if ft.Kind() != reflect.Struct {
						continue
					}
					return false // an unexported struct under a name of its own
				}
			} else if !f.IsExported() {
				continue
			}
			for _, o := range strings.Split(opts, ",") {
				if o == "string" || (o == "omitzero" && src) {
					return false
				}
			}
			if name == "" {
				name = f.Name
			}
			fields = append(fields, convField{name: name, index: idx, typ: f.Type, omitEmpty: strings.Contains(","+opts+",", ",omitempty,")})
		}
		return true
	}
	if !walk(t, nil) {
		return nil, false
	}
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.name] {
			return nil, false
		}
		seen[f.name] = true
	}
	return fields, true
}

func structConverter(src, dst reflect.Type) converter {
	sf, ok1 := convFields(src, true)
	df, ok2 := convFields(dst, false)
	if !ok1 || !ok2 {
		return viaJSON
	}
	type step struct {
		src, dst  []int
		omitEmpty bool
		c         *convPlan // nil: dst has no such field
	}
	var steps []step
	used := map[string]bool{}
	for _, s := range sf {
		var match *convField
		for i := range df {
			if df[i].name == s.name {
				match = &df[i]
				break
			}
		}
		if match == nil { // encoding/json's second choice: a name equal but for case
			for i := range df {
				if strings.EqualFold(df[i].name, s.name) {
					match = &df[i]
					break
				}
			}
		}
		if match == nil {
			// dst has no such field: dropped, but the round trip wrote
			// it, and failed where it could not.
			if mayFailJSON(s.typ, map[reflect.Type]bool{}) {
				steps = append(steps, step{src: s.index, omitEmpty: s.omitEmpty})
			}
			continue
		}
		if used[match.name] {
			return viaJSON // two source fields fill one: the last written wins
		}
		used[match.name] = true
		steps = append(steps, step{src: s.index, dst: match.index, omitEmpty: s.omitEmpty, c: converterLocked(s.typ, match.typ)})
	}
	return func(d, s reflect.Value) error {
		for _, st := range steps {
			sv := s.FieldByIndex(st.src)
			if st.omitEmpty && emptyJSON(sv) {
				continue
			}
			if st.c == nil {
				if _, err := json.Marshal(sv.Interface()); err != nil {
					return err
				}
				continue
			}
			if err := convertValue(st.c, d.FieldByIndex(st.dst), sv); err != nil {
				return err
			}
		}
		return nil
	}
}

// emptyJSON is encoding/json's omitempty test.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// mayFailJSON reports whether encoding/json can fail to write a value of
// t: floats (NaN), marshalers, interfaces, kinds it does not write.
func mayFailJSON(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if customJSON(t, false) {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayFailJSON(t.Elem(), seen)
	case reflect.Map:
		return mayFailJSON(t.Key(), seen) || mayFailJSON(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if mayFailJSON(t.Field(i).Type, seen) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return false
	}
	return true
}
