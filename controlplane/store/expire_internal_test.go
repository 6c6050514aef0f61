package store

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// An Event written while a sweep reads (its read may not see it) counts
// when the sweep ends; a sweep that did not finish leaves the next one to
// read.
func TestEventExpiryWriteDuringARead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	written := func(seen time.Time) []*op {
		return []*op{{typ: opCreate, obj: &api.Event{LastTimestamp: api.NewTime(seen)}}}
	}
	var x eventExpiry
	if !x.scan(t0) {
		t.Fatal("the first sweep does not read")
	}
	x.wrote(written(t0.Add(time.Minute))) // during the read, older than what it keeps
	x.scanned(t0.Add(time.Hour), true)
	if x.scan(t0.Add(time.Minute)) {
		t.Error("a sweep for a cutoff no Event was seen before reads")
	}
	if !x.scan(t0.Add(2 * time.Minute)) {
		t.Fatal("a sweep past the Event written during the last read does not read")
	}
	x.scanned(t0.Add(time.Hour), false)
	if !x.scan(t0) {
		t.Error("after a sweep that did not finish, the next does not read")
	}
	x.scanned(noEvent, true)
	x.wrote([]*op{{typ: opCreate, obj: &api.Event{}}}) // no times: not known
	if !x.scan(t0) {
		t.Error("after an Event with no times was written, the next sweep does not read")
	}
}
