package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/randfill"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/randobj"
)

// createFiller fills objects at random, as api's tests do (deepcopy_test.go):
// times, raw JSON, quantities and int-or-strings valid, everything else
// random, empty and missing parts included.
func createFiller(seed int64) *randfill.Filler {
	return randobj.Filler(seed, randobj.Options{NilChance: 0.2, MaxDepth: 12})
}

// asCreated sets what Create sets before trackFields: the type, a fresh
// uid and creation time, no managedFields from the request; the name and
// generateName as given, or either alone, or neither.
func asCreated(k *api.Kind, o api.Object, n int) {
	*o.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	m := o.GetObjectMeta()
	m.ManagedFields = nil
	m.UID = fmt.Sprintf("uid-%d", n)
	m.CreationTimestamp = api.NewTime(time.Unix(1_700_000_000+int64(n), 0))
	switch n % 4 {
	case 0:
		m.GenerateName = ""
	case 1:
		m.Name = ""
	case 2:
		m.Name, m.GenerateName = "", ""
	}
}

// sibling is o with every value the key replaces changed, and the
// presence of each kept: what a second create from o's template looks like.
func sibling(o api.Object, n int) api.Object {
	s := api.Clone(o)
	m := s.GetObjectMeta()
	other := func(v *string) {
		if *v != "" {
			*v = fmt.Sprintf("%s-other-%d", *v, n)
		}
	}
	other(&m.Name)
	other(&m.GenerateName)
	other(&m.UID)
	other(&m.ResourceVersion)
	if !m.CreationTimestamp.IsZero() {
		m.CreationTimestamp = api.NewTime(m.CreationTimestamp.Add(time.Duration(n+1) * time.Hour))
	}
	return s
}

// uncachedFields is what the field manager gives o's create by manager.
func uncachedFields(t *testing.T, r *Registry, k *api.Kind, manager string, o api.Object) []api.ManagedFieldsEntry {
	t.Helper()
	fm, err := fieldManagerFor(k)
	if err != nil {
		t.Fatal(err)
	}
	c := api.Clone(o)
	r.updateFields(fm, k, manager, nil, c)
	return c.GetObjectMeta().ManagedFields
}

// sameEntries fails unless got is want to the byte once encoded, but for
// the times: each set where want's is, to a whole second in UTC between
// before and now.
func sameEntries(t *testing.T, what string, got, want []api.ManagedFieldsEntry, before time.Time) {
	t.Helper()
	if (got == nil) != (want == nil) || len(got) != len(want) {
		t.Fatalf("%s: %d entries (nil %v), the field manager's %d (nil %v)", what, len(got), got == nil, len(want), want == nil)
	}
	strip := func(es []api.ManagedFieldsEntry) []byte {
		c := make([]api.ManagedFieldsEntry, len(es))
		for i, e := range es {
			c[i] = e
			c[i].Time = nil
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if g, w := strip(got), strip(want); !bytes.Equal(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
	for i := range got {
		if (got[i].Time == nil) != (want[i].Time == nil) {
			t.Fatalf("%s: entry %d: time %v, the field manager's %v", what, i, got[i].Time, want[i].Time)
		}
		if tm := got[i].Time; tm != nil {
			if tm.Location() != time.UTC || tm.Nanosecond() != 0 || tm.Before(before.Truncate(time.Second)) || tm.After(time.Now()) {
				t.Fatalf("%s: entry %d: time %v, not a whole second in UTC since %v", what, i, tm.Time, before)
			}
		}
	}
}

// TestCreateFieldsAreTheFieldManagers: for random objects of every kind
// with a Kubernetes type (pods most), a create's managedFields through
// trackFields, with the cache cold and then warm, are the field manager's
// to the byte but for the time; so are those of a second object that
// differs only in the values the key replaces (name, generateName, uid,
// resourceVersion, creationTimestamp), and which takes the first one's
// entry from the cache. A create with managedFields in the request
// bypasses the cache.
func TestCreateFieldsAreTheFieldManagers(t *testing.T) {
	r := &Registry{log: slog.New(slog.DiscardHandler)}
	managers := []string{"kubectl", "kubectl-client-side-apply", "bench", "unknown"}
	hits, withEntry, kinds := 0, 0, 0
	for i, k := range api.Kinds {
		if k.Internal {
			continue
		}
		if _, err := fieldManagerFor(k); err != nil {
			continue
		}
		kinds++
		n := 30
		if k.Kind == "Pod" {
			n = 600
		}
		f := createFiller(int64(1000 + i))
		for j := range n {
			o := k.New()
			f.Fill(o)
			asCreated(k, o, j)
			manager := managers[j%len(managers)]
			ctx := context.WithValue(context.Background(), fieldManagerKey{}, manager)
			createFields.Reset()
			what := fmt.Sprintf("%s #%d", k.Kind, j)

			want := uncachedFields(t, r, k, manager, o)
			before := time.Now()
			cold := api.Clone(o)
			r.trackFields(ctx, k, nil, cold)
			sameEntries(t, what+" cold", cold.GetObjectMeta().ManagedFields, want, before)
			if len(want) > 0 {
				withEntry++
			}

			key, plain := createFieldsKey(k, manager, o)
			_, stored := createFields.Get(key)
			sib := sibling(o, j)
			sibKey, _ := createFieldsKey(k, manager, sib)
			if plain && (!stored || sibKey != key) {
				t.Fatalf("%s: stored %v, the sibling's key the same %v", what, stored, sibKey == key)
			}
			if stored {
				hits++
			}
			warm := api.Clone(o)
			r.trackFields(ctx, k, nil, warm)
			sameEntries(t, what+" warm", warm.GetObjectMeta().ManagedFields, want, before)
			warmSib := api.Clone(sib)
			r.trackFields(ctx, k, nil, warmSib)
			sameEntries(t, what+" sibling", warmSib.GetObjectMeta().ManagedFields, uncachedFields(t, r, k, manager, sib), before)
			if len(want) > 0 && &warm.GetObjectMeta().ManagedFields[0].FieldsV1[0] == &warmSib.GetObjectMeta().ManagedFields[0].FieldsV1[0] {
				t.Fatalf("%s: two creates share the bytes of their fieldsV1", what)
			}

			// managedFields in the request: the field manager starts from them.
			sent := api.Clone(o)
			sent.GetObjectMeta().ManagedFields = []api.ManagedFieldsEntry{{Manager: "client", Operation: "Update", APIVersion: k.APIVersion(), FieldsType: "FieldsV1", FieldsV1: json.RawMessage(`{"f:metadata":{"f:labels":{"f:x":{}}}}`)}}
			wantSent := uncachedFields(t, r, k, manager, sent)
			r.trackFields(ctx, k, nil, sent)
			sameEntries(t, what+" with managedFields", sent.GetObjectMeta().ManagedFields, wantSent, before)
		}
	}
	t.Logf("%d kinds; %d creates remembered, %d with an entry", kinds, hits, withEntry)
	if kinds < 20 || withEntry < 300 || hits < 300 {
		t.Fatalf("too little compared: %d kinds, %d creates remembered, %d with an entry", kinds, hits, withEntry)
	}
}

// TestCreateFieldsKeySeparatesShapes: pods that differ from one template
// in a map key, an associative list's key, a set's value, a field's
// presence (generateName's among them) or any other value get keys of
// their own, and with the cache warm each gets the field manager's entry;
// the structural differences change that entry, so sharing one would be
// wrong.
func TestCreateFieldsKeySeparatesShapes(t *testing.T) {
	r := &Registry{log: slog.New(slog.DiscardHandler)}
	k := api.KindForResource("", "v1", "pods")
	template := func() *api.Pod {
		return &api.Pod{
			TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: api.ObjectMeta{
				Name: "web-1", Namespace: "default", UID: "u1", CreationTimestamp: api.Now(),
				Labels:     map[string]string{"app": "web"},
				Finalizers: []string{"example.com/a"},
			},
			Spec: api.PodSpec{Containers: []api.Container{{
				Name: "main", Image: "nginx",
				Ports: []api.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}},
			}}},
		}
	}
	variants := map[string]func(p *api.Pod){
		"label key":        func(p *api.Pod) { p.Labels = map[string]string{"tier": "web"} },
		"container name":   func(p *api.Pod) { p.Spec.Containers[0].Name = "side" },
		"port key":         func(p *api.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 81 },
		"finalizer":        func(p *api.Pod) { p.Finalizers = []string{"example.com/b"} },
		"field present":    func(p *api.Pod) { p.Spec.Hostname = "h" },
		"generateName set": func(p *api.Pod) { p.GenerateName = "web-" },
	}
	scalar := func(p *api.Pod) { p.Spec.Containers[0].Image = "busybox" }
	ctx := context.WithValue(context.Background(), fieldManagerKey{}, "kubectl")
	createFields.Reset()
	base := template()
	baseKey, ok := createFieldsKey(k, "kubectl", base)
	if !ok {
		t.Fatal("the template is not a plain create")
	}
	before := time.Now()
	r.trackFields(ctx, k, nil, base)
	baseFields := base.ManagedFields[0].FieldsV1
	for name, change := range variants {
		p := template()
		change(p)
		key, _ := createFieldsKey(k, "kubectl", p)
		if key == baseKey {
			t.Fatalf("%s: the template's key", name)
		}
		want := uncachedFields(t, r, k, "kubectl", p)
		if bytes.Equal(want[0].FieldsV1, baseFields) {
			t.Fatalf("%s: the field manager gives the template's fields %s", name, baseFields)
		}
		r.trackFields(ctx, k, nil, p)
		sameEntries(t, name, p.ManagedFields, want, before)
	}
	p := template()
	scalar(p)
	if key, _ := createFieldsKey(k, "kubectl", p); key == baseKey {
		t.Fatal("a value outside the server's metadata: the template's key")
	}
	if key, _ := createFieldsKey(k, "kube-controller-manager", template()); key == baseKey {
		t.Fatal("another manager: the template's key")
	}
}

// TestCreateFieldsKeyReadsEveryField: for random objects of every kind,
// each change that changes the object's JSON changes its key, but for the
// five server-owned values the key stands a placeholder for: every
// string, number and bool a struct, list or map holds; a map key; a
// pointer set where it was nil; a value with its own JSON (a time, a
// quantity) reset to its zero. So a key is never shared by two objects
// the field manager could see differently.
func TestCreateFieldsKeyReadsEveryField(t *testing.T) {
	probes := 0
	for i, k := range api.Kinds {
		if k.Internal {
			continue
		}
		f := createFiller(int64(5000 + i))
		for j := range 2 {
			o := k.New()
			f.Fill(o)
			asCreated(k, o, j)
			base, ok := createFieldsKey(k, "kubectl", o)
			if !ok {
				continue
			}
			baseJSON, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			m := o.GetObjectMeta()
			owned := map[any]bool{&m.Name: true, &m.GenerateName: true, &m.UID: true, &m.ResourceVersion: true, &m.CreationTimestamp: true}
			probe := func(path string, change, undo func()) {
				change()
				defer undo()
				js, err := json.Marshal(o)
				if err != nil || bytes.Equal(js, baseJSON) {
					return // the change does not show in the JSON
				}
				probes++
				if key, ok := createFieldsKey(k, "kubectl", o); ok && key == base {
					t.Fatalf("%s: %s changed the JSON but not the key", k.Kind, path)
				}
			}
			var walk func(v reflect.Value, path string)
			walk = func(v reflect.Value, path string) {
				if v.CanAddr() && owned[v.Addr().Interface()] {
					return
				}
				if v.CanAddr() && (v.Type().Implements(jsonMarshaler) || v.Addr().Type().Implements(jsonMarshaler)) && v.Kind() != reflect.Pointer && v.Kind() != reflect.Slice {
					if !v.IsZero() {
						old := reflect.ValueOf(v.Interface())
						probe(path, func() { v.Set(reflect.Zero(v.Type())) }, func() { v.Set(old) })
					}
					return
				}
				switch v.Kind() {
				case reflect.String:
					old := v.String()
					probe(path, func() { v.SetString(old + "x") }, func() { v.SetString(old) })
				case reflect.Bool:
					old := v.Bool()
					probe(path, func() { v.SetBool(!old) }, func() { v.SetBool(old) })
				case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
					old := v.Int()
					probe(path, func() { v.SetInt(old ^ 1) }, func() { v.SetInt(old) })
				case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
					old := v.Uint()
					probe(path, func() { v.SetUint(old ^ 1) }, func() { v.SetUint(old) })
				case reflect.Float32, reflect.Float64:
					old := v.Float()
					probe(path, func() { v.SetFloat(old + 1) }, func() { v.SetFloat(old) })
				case reflect.Pointer:
					if v.IsNil() {
						probe(path, func() { v.Set(reflect.New(v.Type().Elem())) }, func() { v.Set(reflect.Zero(v.Type())) })
						return
					}
					walk(v.Elem(), path)
				case reflect.Struct:
					for i := range v.NumField() {
						if v.Type().Field(i).IsExported() {
							walk(v.Field(i), path+"."+v.Type().Field(i).Name)
						}
					}
				case reflect.Slice, reflect.Array:
					for i := range v.Len() {
						walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
					}
				case reflect.Map:
					for _, key := range v.MapKeys() {
						val := v.MapIndex(key)
						renamed := reflect.ValueOf(key.String() + "x").Convert(key.Type())
						probe(path+"{key}", func() { v.SetMapIndex(key, reflect.Value{}); v.SetMapIndex(renamed, val) },
							func() { v.SetMapIndex(renamed, reflect.Value{}); v.SetMapIndex(key, val) })
						if val.Kind() == reflect.String {
							other := reflect.ValueOf(val.String() + "x").Convert(val.Type())
							probe(path+"["+key.String()+"]", func() { v.SetMapIndex(key, other) }, func() { v.SetMapIndex(key, val) })
						}
					}
				}
			}
			walk(reflect.ValueOf(o).Elem(), k.Kind)
			if key, _ := createFieldsKey(k, "kubectl", o); key != base {
				t.Fatalf("%s: the probes did not leave the object as it was", k.Kind)
			}
		}
	}
	t.Logf("%d changes probed", probes)
	if probes < 10000 {
		t.Fatalf("only %d changes probed", probes)
	}
}

// BenchmarkCreateFieldsKey: the key of a create of a Deployment's pod,
// against the JSON encoding it replaced (json.Marshal and its SHA-256).
func BenchmarkCreateFieldsKey(b *testing.B) {
	k := api.KindForResource("", "v1", "pods")
	p := &api.Pod{
		TypeMeta:   api.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: api.ObjectMeta{GenerateName: "web-7c9f5d8b6-", Namespace: "default", UID: "u1", CreationTimestamp: api.Now(), Labels: map[string]string{"app": "web", "pod-template-hash": "7c9f5d8b6"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27",
			Ports:     []api.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}},
			Resources: api.ResourceRequirements{Requests: quantities("cpu", "100m", "memory", "128Mi")}}},
			RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler"},
	}
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := createFieldsKey(k, "kube-controller-manager", p); !ok {
				b.Fatal("not a plain create")
			}
		}
	})
	b.Run("json-sha256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			js, err := json.Marshal(p)
			if err != nil {
				b.Fatal(err)
			}
			_ = sha256.Sum256(js)
		}
	})
}
