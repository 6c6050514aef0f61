// Package randobj fills skiff's API objects at random for the tests that
// prove a fast path gives what a slow one gave (api.ConvertJSON against a
// JSON round trip, the managedFields cache against the field manager).
// Only tests import it. api's own tests keep their filler (deepcopy_test.go):
// they cannot import a package that imports api.
package randobj

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/randfill"

	"skiff.dev/skiff/api"
)

// Options are what the tests vary.
type Options struct {
	NilChance float64
	MaxDepth  int
	// Zones are the locations of random times (UTC when empty): a time
	// built in memory keeps its zone, one that came from JSON is UTC.
	Zones []*time.Location
	// RawSpaced writes raw JSON values with a space after the colon, as a
	// hand-written one may be (JSON from the store has none).
	RawSpaced bool
	// Funcs are further randfill functions, after the ones for api.Time,
	// api.MicroTime, json.RawMessage, resource.Quantity, api.IntOrString
	// and any (values JSON can carry, which randfill's own are not).
	Funcs []any
}

// Filler returns a seeded randfill.Filler for skiff's API objects.
func Filler(seed int64, o Options) *randfill.Filler {
	zones := o.Zones
	if len(zones) == 0 {
		zones = []*time.Location{time.UTC}
	}
	at := func(c randfill.Continue) time.Time {
		t := time.Unix(c.Int63n(1<<33), c.Int63n(1e9))
		if len(zones) == 1 {
			return t.In(zones[0])
		}
		return t.In(zones[c.Intn(len(zones))])
	}
	raw := `{"n":%d,"s":[%q]}`
	if o.RawSpaced {
		raw = `{"n": %d, "s":[%q]}`
	}
	funcs := []any{
		func(t *api.Time, c randfill.Continue) {
			if c.Bool() {
				*t = api.Time{Time: at(c)}
			}
		},
		func(t *api.MicroTime, c randfill.Continue) {
			if c.Bool() {
				*t = api.MicroTime{Time: at(c)}
			}
		},
		func(r *json.RawMessage, c randfill.Continue) {
			if c.Bool() {
				*r = json.RawMessage(fmt.Sprintf(raw, c.Intn(100), c.String(8)))
			}
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(v *api.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = api.IntOrString{Type: 1, StrVal: c.String(6)}
			} else {
				*v = api.IntOrString{IntVal: c.Int31()}
			}
		},
		func(v *any, c randfill.Continue) {
			if c.Bool() {
				*v = map[string]any{"k": []any{c.String(4), float64(c.Intn(9))}}
			}
		},
	}
	return randfill.NewWithSeed(seed).NilChance(o.NilChance).NumElements(0, 3).MaxDepth(o.MaxDepth).Funcs(append(funcs, o.Funcs...)...)
}
