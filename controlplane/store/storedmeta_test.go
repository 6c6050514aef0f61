package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/randobj"
)

// unmarshalMeta is what readStoredMeta replaces: encoding/json's decode of
// the whole object into the three fields.
func unmarshalMeta(raw []byte) (storedMeta, error) {
	var into struct {
		Metadata struct {
			UID               string   `json:"uid"`
			ResourceVersion   string   `json:"resourceVersion"`
			CreationTimestamp api.Time `json:"creationTimestamp"`
		} `json:"metadata"`
	}
	err := json.Unmarshal(raw, &into)
	m := into.Metadata
	return storedMeta{UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp}, err
}

// forRandomObjects calls check with 20 objects of every kind, filled at
// random, type set, metadata changed by prepare, and the JSON they encode
// to (objects randfill made unencodable are passed over). It fails unless
// most were checked.
func forRandomObjects(t *testing.T, seed int64, prepare func(m *api.ObjectMeta, i int), check func(k *api.Kind, o api.Object, i int, raw []byte)) {
	f := randobj.Filler(seed, randobj.Options{NilChance: 0.2, MaxDepth: 8})
	checked := 0
	for _, k := range api.Kinds {
		for i := range 20 {
			o := k.New()
			f.Fill(o)
			*o.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
			prepare(o.GetObjectMeta(), i)
			raw, err := json.Marshal(o)
			if err != nil {
				continue // randfill made a value JSON cannot carry
			}
			check(k, o, i, raw)
			checked++
		}
	}
	if checked < len(api.Kinds)*10 {
		t.Fatalf("only %d objects checked", checked)
	}
}

// TestReadStoredMetaIsUnmarshal: for every kind filled at random (empty and
// missing metadata fields included), the committer's early-stopping read
// gives what decoding the whole stored object gave.
func TestReadStoredMetaIsUnmarshal(t *testing.T) {
	prepare := func(m *api.ObjectMeta, i int) {
		switch i % 4 {
		case 0:
			m.UID, m.ResourceVersion = "", ""
		case 1:
			m.CreationTimestamp = api.Time{}
		case 2:
			m.ResourceVersion = fmt.Sprint(i + 1)
		}
	}
	forRandomObjects(t, 7, prepare, func(k *api.Kind, _ api.Object, i int, raw []byte) {
		want, err := unmarshalMeta(raw)
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		got, err := readStoredMeta(raw)
		if err != nil {
			t.Fatalf("%s %d: readStoredMeta: %v\n%s", k.Kind, i, err, raw)
		}
		if got.UID != want.UID || got.ResourceVersion != want.ResourceVersion || !got.CreationTimestamp.Equal(want.CreationTimestamp.Time) {
			t.Fatalf("%s %d: readStoredMeta = %+v, encoding/json %+v\n%s", k.Kind, i, got, want, raw)
		}
	})
	for _, raw := range []string{`{}`, `{"metadata":{}}`, `{"kind":"Pod","metadata":{"uid":"u","creationTimestamp":null}}`, `{"metadata":{"labels":{"uid":"x"},"resourceVersion":"5"}}`} {
		want, _ := unmarshalMeta([]byte(raw))
		got, err := readStoredMeta([]byte(raw))
		if err != nil || got != want {
			t.Errorf("readStoredMeta(%s) = %+v, %v; encoding/json %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{``, `[]`, `{"metadata":[]}`, `{"metadata":{"uid":5}}`, `{"metadata":{"uid":"u"`} {
		if _, err := readStoredMeta([]byte(raw)); err == nil {
			t.Errorf("readStoredMeta(%q): no error", raw)
		}
	}
}

// TestWithResourceVersionIsMarshal: for every kind filled at random, the
// committer's splice of a new resourceVersion into an update's JSON gives
// the encoding of the object with that resourceVersion, byte for byte;
// JSON whose resourceVersion is not the one expected is not spliced.
func TestWithResourceVersionIsMarshal(t *testing.T) {
	prepare := func(m *api.ObjectMeta, i int) {
		m.ResourceVersion = fmt.Sprint(i + 7)
		if i%3 == 0 {
			m.Annotations = map[string]string{"resourceVersion": m.ResourceVersion}
		}
	}
	forRandomObjects(t, 11, prepare, func(k *api.Kind, o api.Object, i int, enc []byte) {
		m := o.GetObjectMeta()
		next := fmt.Sprint(1000 + i)
		got, err := withResourceVersion(enc, m.ResourceVersion, next)
		if err != nil {
			t.Fatalf("%s %d: %v\n%s", k.Kind, i, err, enc)
		}
		if miss, err := withResourceVersion(enc, "6", next); miss != nil || err != nil {
			t.Fatalf("%s %d: spliced JSON whose resourceVersion is not 6: %v", k.Kind, i, err)
		}
		old := m.ResourceVersion
		m.ResourceVersion = next
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s %d: withResourceVersion\n%s\nencoding/json\n%s", k.Kind, i, got, want)
		}
		// A revision as long as the old one is written over it in enc.
		same := strings.Repeat("9", len(old))
		got, err = withResourceVersion(enc, old, same)
		if err != nil || got == nil || &got[0] != &enc[0] {
			t.Fatalf("%s %d: %s over %s: %v, not in place", k.Kind, i, same, old, err)
		}
		m.ResourceVersion = same
		if want, _ := json.Marshal(o); string(got) != string(want) {
			t.Fatalf("%s %d: withResourceVersion in place\n%s\nencoding/json\n%s", k.Kind, i, got, want)
		}
	})
	for _, enc := range []string{`{"metadata":{}}`, `{"kind":"Event","involvedObject":{"resourceVersion":"5"},"metadata":{"name":"e"}}`} {
		if got, err := withResourceVersion([]byte(enc), "5", "6"); got != nil || err != nil {
			t.Errorf("withResourceVersion(%s) = %s, %v; want nothing", enc, got, err)
		}
	}
	if _, err := withResourceVersion([]byte(`{"metadata":{"name":"a",`), "5", "6"); err == nil {
		t.Error("withResourceVersion of cut JSON: no error")
	}
}

// TestStoredJSONIsMarshal: the writer encodes a create or an update
// before the commit (preEncode, with a placeholder where the object has no
// resourceVersion) and the committer splices the revision in; what is
// stored is, byte for byte, the encoding of the object the write returns:
// for every kind filled at random, on a create, an unconditional update
// and a conditional one.
func TestStoredJSONIsMarshal(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	prepare := func(m *api.ObjectMeta, i int) {
		m.Name = fmt.Sprintf("o-%d", i)
		m.ResourceVersion, m.UID = "", ""
		m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
		if i%3 == 0 {
			m.Annotations = map[string]string{"resourceVersion": "0"}
		}
	}
	forRandomObjects(t, 13, prepare, func(k *api.Kind, o api.Object, i int, _ []byte) {
		if !k.Namespaced {
			o.GetObjectMeta().Namespace = ""
		}
		m := o.GetObjectMeta()
		same := func(what string, out api.Object, err error) api.Object {
			t.Helper()
			if err != nil {
				t.Fatalf("%s %d: %s: %v", k.Kind, i, what, err)
			}
			want, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			got, hit, _, err := s.read(ctx, k, m.Namespace, m.Name)
			if err != nil {
				t.Fatal(err)
			}
			if hit.obj != nil {
				got = hit.raw
			}
			if string(got) != string(want) {
				t.Fatalf("%s %d: %s stored\n%s\nthe object it returned encodes to\n%s", k.Kind, i, what, got, want)
			}
			return out
		}
		out, err := s.Create(ctx, o)
		out = same("create", out, err)
		next := api.Clone(out)
		next.GetObjectMeta().ResourceVersion = ""
		out, err = s.Update(ctx, next)
		out = same("unconditional update", out, err)
		out, err = s.Update(ctx, api.Clone(out))
		same("conditional update", out, err)
	})
}

// BenchmarkWithResourceVersion: what the committer does to an update's
// JSON, against encoding the object again.
func BenchmarkWithResourceVersion(b *testing.B) {
	o := benchPod()
	enc, err := json.Marshal(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("withResourceVersion", func(b *testing.B) {
		b.ReportAllocs()
		rvs := [2]string{"12345", "12346"} // in place: back and forth
		i := 0
		for b.Loop() {
			if out, err := withResourceVersion(enc, rvs[i%2], rvs[(i+1)%2]); out == nil || err != nil {
				b.Fatal(out, err)
			}
			i++
		}
	})
	b.Run("withResourceVersion-longer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out, err := withResourceVersion(enc, "12345", "123456"); out == nil || err != nil {
				b.Fatal(out, err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o.ResourceVersion = "12346"
			if _, err := json.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPodJSON is a Deployment's pod as the API server stores it: labels,
// an owner, managedFields, resources, the defaults.
var benchPodJSON = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-7c9f5d8b6-","namespace":"default","uid":"0b8c9a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21","creationTimestamp":"2026-12-02T11:00:00Z","labels":{"app":"web","pod-template-hash":"7c9f5d8b6"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7c9f5d8b6","uid":"1b8c9a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-12-02T11:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}}}}}}]},"spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"phase":"Pending","qosClass":"Burstable"}}`)

// benchPod is benchPodJSON decoded, bound to a node.
func benchPod() *api.Pod {
	var p api.Pod
	if err := json.Unmarshal(benchPodJSON, &p); err != nil {
		panic(err)
	}
	p.Name, p.ResourceVersion, p.Spec.NodeName = "web-1", "12345", "node-1"
	return &p
}

// BenchmarkReadStoredMeta: what the committer reads of each object it
// updates, against encoding/json's decode of the whole object.
func BenchmarkReadStoredMeta(b *testing.B) {
	raw, err := json.Marshal(benchPod())
	if err != nil {
		b.Fatal(err)
	}
	for name, read := range map[string]func([]byte) (storedMeta, error){"readStoredMeta": readStoredMeta, "encoding-json": unmarshalMeta} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := read(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLiveWatchersGetTheCommittedObject: a live watcher gets the writer's
// own copy of what it wrote (op.live), not a decode of the stored JSON:
// for every kind filled at random and normalised as JSON leaves it (as
// what a write starts from, a request or a read, is), on a create, an
// update and a GuaranteedUpdate, it equals the decode of what was
// stored, and it is not the object the write returned: changing that
// after the write changes nothing a watcher holds.
func TestLiveWatchersGetTheCommittedObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	watches := map[*api.Kind]<-chan Event{}
	for _, k := range api.Kinds {
		ch, err := s.Watch(ctx, k, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		watches[k] = ch
	}
	prepare := func(m *api.ObjectMeta, i int) {
		m.Name = fmt.Sprintf("o-%d", i)
		m.ResourceVersion, m.UID = "", ""
		m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
	}
	checked := 0
	forRandomObjects(t, 27, prepare, func(k *api.Kind, filled api.Object, i int, raw []byte) {
		o, err := decode(k, raw) // normalised as JSON leaves it
		if err != nil {
			t.Fatal(err)
		}
		if !k.Namespaced {
			o.GetObjectMeta().Namespace = ""
		}
		m := o.GetObjectMeta()
		check := func(what string, out api.Object, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s %d: %s: %v", k.Kind, i, what, err)
			}
			var ev Event
			select {
			case ev = <-watches[k]:
			case <-ctx.Done():
				t.Fatalf("%s %d: %s: no event", k.Kind, i, what)
			}
			stored, err := s.Get(ctx, k, m.Namespace, m.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.Object, stored) {
				t.Fatalf("%s %d: %s: the watcher got\n%+v\nthe store decodes\n%+v", k.Kind, i, what, ev.Object, stored)
			}
			if ev.Object == out {
				t.Fatalf("%s %d: %s: the watcher got the very object the write returned", k.Kind, i, what)
			}
			out.GetObjectMeta().Labels = map[string]string{"changed after": what}
			if ev.Object.GetObjectMeta().Labels["changed after"] == what {
				t.Fatalf("%s %d: %s: changing what the write returned changed the watcher's object", k.Kind, i, what)
			}
			checked++
		}
		out, err := s.Create(ctx, o)
		check("create", out, err)
		next := api.Clone(out)
		next.GetObjectMeta().Annotations = map[string]string{"update": strconv.Itoa(i)}
		out, err = s.Update(ctx, next)
		check("update", out, err)
		out, err = s.GuaranteedUpdate(ctx, k, m.Namespace, m.Name, func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Annotations = map[string]string{"guaranteed": strconv.Itoa(i)}
			return cur, nil
		})
		check("guaranteed update", out, err)
	})
	if checked < 3*len(api.Kinds)*10 {
		t.Fatalf("only %d writes checked", checked)
	}
}
