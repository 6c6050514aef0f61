package apiserver

import (
	"encoding/json"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/recent"
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
// (where set) replaced by a placeholder (shapekey.go: every field the JSON
// encoding reads, so two objects of a key have the same JSON): every
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

// createFields is the process's cache of create entries.
var createFields = recent.New[shapeKey, []api.ManagedFieldsEntry](createFieldsGeneration)

// createFieldsPlaceholder stands for a server-owned metadata value in a key.
const createFieldsPlaceholder = "\x00"

// createFieldsKey is the cache key of a create of obj (kind k) by manager,
// and false where the create is not the plain case: managedFields in the
// request, or an object whose JSON fails. It changes obj's metadata while
// it reads it and puts it back.
func createFieldsKey(k *api.Kind, manager string, obj api.Object) (shapeKey, bool) {
	m := obj.GetObjectMeta()
	if m.ManagedFields != nil {
		return shapeKey{}, false
	}
	ct := m.CreationTimestamp
	if y := ct.UTC().Year(); !ct.IsZero() && (y < 0 || y > 9999) {
		return shapeKey{}, false // its JSON fails: the library never sees the object
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
	kb := newKeyBuilder()
	for _, s := range []string{manager, k.Group, k.Version, k.Kind} {
		kb.str(s)
	}
	kb.value(obj)
	*m = saved
	return kb.sum()
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
