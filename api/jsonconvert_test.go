package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kscheme "k8s.io/client-go/kubernetes/scheme"
)

// TestConvertJSONConcurrentFirstUse: goroutines converting kinds no
// converter was built for yet each get the round trip's result (a
// converter is published only once built; run with -race). The results
// against the round trip for every kind: api/patch's
// TestConvertJSONIsTheRoundTrip.
func TestConvertJSONConcurrentFirstUse(t *testing.T) {
	type job struct {
		obj  Object
		kt   reflect.Type
		want any
	}
	var jobs []job
	for i, k := range Kinds {
		ko, err := kscheme.Scheme.New(schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind})
		if err != nil {
			continue
		}
		kt := reflect.TypeOf(ko).Elem()
		o := filled(t, filler(int64(i)), k)
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		want := reflect.New(kt).Interface()
		if err := json.Unmarshal(b, want); err != nil {
			continue
		}
		jobs = append(jobs, job{o, kt, want})
	}
	if len(jobs) < 20 {
		t.Fatalf("%d kinds to convert: the test says little", len(jobs))
	}
	converters.Clear()
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(jobs))
	for g := range 8 {
		wg.Go(func() {
			for j := range jobs {
				jb := jobs[(j+g*7)%len(jobs)]
				got := reflect.New(jb.kt).Interface()
				if err := ConvertJSON(got, jb.obj); err != nil || !reflect.DeepEqual(got, jb.want) {
					errs <- fmt.Sprintf("%T: %v, or not the round trip's", jb.obj, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
