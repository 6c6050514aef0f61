package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Time and MicroTime encode as json.Marshal of their formatted string
// would, and decode what they encode, escaped JSON strings included.
func TestTimeJSON(t *testing.T) {
	zone := time.FixedZone("x", 5*3600+1800)
	for _, tt := range []time.Time{
		time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 3, 11, 0, 0, 123456789, zone),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, zone),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // a year RFC 3339 cannot write: as Format writes it
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		for _, c := range []struct {
			v      json.Marshaler
			layout string
		}{{Time{tt}, time.RFC3339}, {MicroTime{tt}, "2006-01-02T15:04:05.000000Z07:00"}} {
			got, err := c.v.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(tt.UTC().Format(c.layout))
			if string(got) != string(want) {
				t.Errorf("%T %v: %s, want %s", c.v, tt, got, want)
			}
		}
	}
	var zero Time
	if b, _ := zero.MarshalJSON(); string(b) != "null" {
		t.Errorf("zero time: %s", b)
	}
	for in, want := range map[string]time.Time{
		`"2026-12-03T11:00:00Z"`:           time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC),
		`"2026-12-03T16:30:00+05:30"`:      time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC),
		`"\u0032026-12-03T11:00:00Z"`:      time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC),
		`"2026-12-03T11:00:00.123456789Z"`: time.Date(2026, 12, 3, 11, 0, 0, 123456789, time.UTC),
		`""`:                               {},
		`null`:                             {},
	} {
		var got Time
		if err := got.UnmarshalJSON([]byte(in)); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s: %v (%v), want %v", in, got, err, want)
		}
	}
	for _, in := range []string{`"yesterday"`, `"2026-12-03"`, `2026`, `"2026-12-03T11:00:00Z`, `"2026-12-03T11:00:00Z\"`, "\"2026-12-03T11:00:00Z\x00\""} {
		var got Time
		if err := got.UnmarshalJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), "time") {
			t.Errorf("%s: accepted as %v (%v)", in, got, err)
		}
	}
}
