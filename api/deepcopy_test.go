package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/randfill"
)

// filled returns a random object of kind k, as it would come from JSON
// (the store, a cache, a request): filled at random, then through a JSON
// round trip.
func filled(t *testing.T, f *randfill.Filler, k *Kind) Object {
	t.Helper()
	o := k.New()
	f.Fill(o)
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatalf("%s: encode: %v", k.Kind, err)
	}
	out := k.New()
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decode: %v", k.Kind, err)
	}
	return out
}

func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(t *Time, c randfill.Continue) {
			if c.Bool() {
				*t = Time{time.Unix(c.Int63n(1<<33), c.Int63n(1e9)).UTC()}
			}
		},
		func(t *MicroTime, c randfill.Continue) {
			if c.Bool() {
				*t = MicroTime{time.Unix(c.Int63n(1<<33), c.Int63n(1e9)).UTC()}
			}
		},
		func(r *json.RawMessage, c randfill.Continue) {
			if c.Bool() {
				*r = json.RawMessage(fmt.Sprintf(`{"n":%d,"s":[%q]}`, c.Intn(100), c.String(8)))
			}
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(v *IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = IntOrString{Type: 1, StrVal: c.String(6)}
			} else {
				*v = IntOrString{IntVal: c.Int31()}
			}
		},
		func(v *any, c randfill.Continue) {
			if c.Bool() {
				*v = map[string]any{"k": []any{c.String(4), float64(c.Intn(9))}}
			}
		},
	)
}

// eachFilled calls fn with count objects of every registered kind, each
// filled at random by filler, seeded with seed plus the kind's index.
func eachFilled(seed int64, count int, fn func(k *Kind, n int, o Object)) {
	for i, k := range Kinds {
		f := filler(seed + int64(i))
		for n := range count {
			o := k.New()
			f.Fill(o)
			fn(k, n, o)
		}
	}
}

// TestCloneMatchesJSONRoundTrip: for every registered kind, filled at
// random as it would come from JSON, Clone (deepcopy-gen's code) and the
// reflect walk each give what the JSON round trip they replaced gave (and
// what they copied), sharing no memory with it. A field added to a type
// without hack/deepcopy.sh run again is copied as the struct's plain
// assignment copies it: shared, when it holds references.
func TestCloneMatchesJSONRoundTrip(t *testing.T) {
	for i, k := range Kinds {
		f := filler(int64(i))
		for n := range 40 {
			o := filled(t, f, k)
			b1, _ := json.Marshal(o)
			rt := k.New()
			if err := json.Unmarshal(b1, rt); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				how string
				obj Object
			}{{"Clone", Clone(o)}, {"the reflect walk", reflectClone(o)}} {
				if !reflect.DeepEqual(c.obj, o) {
					t.Fatalf("%s #%d: %s's copy differs from the original:\n%+v\n%+v", k.Kind, n, c.how, c.obj, o)
				}
				if !reflect.DeepEqual(c.obj, rt) {
					t.Fatalf("%s #%d: %s's copy differs from the JSON round trip", k.Kind, n, c.how)
				}
				if where := shared(reflect.ValueOf(c.obj), reflect.ValueOf(o), k.Kind); where != "" {
					t.Fatalf("%s #%d: %s's copy shares %s with the original", k.Kind, n, c.how, where)
				}
			}
		}
	}
}

// TestEveryKindCopiesItself: every registered kind (and every review
// kind) has deepcopy-gen's DeepCopyObject, so Clone never takes the
// reflect walk for one: a new kind's struct needs the
// +k8s:deepcopy-gen:interfaces tag and hack/deepcopy.sh run again.
func TestEveryKindCopiesItself(t *testing.T) {
	for _, k := range append(append([]*Kind{}, Kinds...), ReviewKinds...) {
		if _, ok := k.New().(objectCopier); !ok {
			t.Errorf("%s: no generated DeepCopyObject (tag its struct +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object, then run hack/deepcopy.sh)", k.Kind)
		}
	}
	var nilPod *Pod
	if c, ok := any(nilPod).(objectCopier); !ok || c.DeepCopyObject() != nil {
		t.Fatal("DeepCopyObject of a nil *Pod is not nil: Clone(nil) would not make an empty pod")
	}
}

// TestCloneOfInMemoryObjects: what the JSON round trip normalised is now
// kept (the copy is exact), and a nil object clones to an empty one.
func TestCloneOfInMemoryObjects(t *testing.T) {
	zero := int32(0)
	now := time.Date(2026, 12, 2, 1, 2, 3, 456, time.UTC)
	d := &Deployment{}
	d.Name = "web"
	d.Spec.Replicas = &zero
	d.CreationTimestamp = NewTime(now)
	d.Labels = map[string]string{}
	c := Clone(d)
	if !reflect.DeepEqual(c, d) || c.Spec.Replicas == d.Spec.Replicas || c.Labels == nil {
		t.Fatalf("clone %+v of %+v", c, d)
	}
	*c.Spec.Replicas = 3
	c.Labels["a"] = "b"
	if *d.Spec.Replicas != 0 || len(d.Labels) != 0 {
		t.Fatalf("changing the clone changed the original: %+v", d)
	}
	var nilPod *Pod
	if p := Clone(nilPod); p == nil || p.Name != "" {
		t.Fatalf("Clone(nil) = %+v, want an empty pod", p)
	}
}

// TestCloneConcurrentFirstUse: goroutines copying kinds by the reflect
// walk, no copier built for them yet, each get a whole copy (a copier is published only once
// built; run with -race).
func TestCloneConcurrentFirstUse(t *testing.T) {
	objs := make([]Object, len(Kinds))
	for i, k := range Kinds {
		objs[i] = filled(t, filler(int64(i)), k)
	}
	copiers.Clear()
	refCache.Clear()
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(objs))
	for g := range 8 {
		wg.Go(func() {
			for j := range objs {
				o := objs[(j+g*7)%len(objs)]
				if c := reflectClone(o); !reflect.DeepEqual(c, o) {
					errs <- fmt.Sprintf("%T: the clone differs", o)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// shared reports where a and b (equal values) share a pointer, a slice's
// array or a map; "" when nowhere.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() && a.Elem().Type().Size() > 0 {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() > 0 && a.Type().Elem().Size() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if w := shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); w != "" {
				return w
			}
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for it := a.MapRange(); it.Next(); {
			if w := shared(it.Value(), b.MapIndex(it.Key()), fmt.Sprintf("%s[%v]", path, it.Key())); w != "" {
				return w
			}
		}
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[resource.Quantity]() {
			return "" // copied by its DeepCopy
		}
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if w := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); w != "" {
				return w
			}
		}
	}
	return ""
}

func BenchmarkClonePod(b *testing.B) {
	t := &testing.T{}
	p := filled(t, filler(1), MustKindOf(&Pod{})).(*Pod)
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Clone(p)
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = reflectClone(p)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, _ := json.Marshal(p)
			var out Pod
			_ = json.Unmarshal(data, &out)
		}
	})
}

// reflectClone is Clone by deepCopy's reflect walk, which copies the
// types deepcopy-gen does not (TraceSpan's Details).
func reflectClone[T Object](obj T) T {
	out := reflect.New(reflect.TypeOf(obj).Elem())
	deepCopy(out.Elem(), reflect.ValueOf(obj).Elem())
	return out.Interface().(T)
}
