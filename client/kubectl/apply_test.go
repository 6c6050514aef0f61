package kubectl_test

import (
	"context"
	"io"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/client/kubectl"
)

// managers records the field manager of each write.
type managers struct {
	client.Interface
	got []string
}

func (m *managers) Create(ctx context.Context, o api.Object) (api.Object, error) {
	m.got = append(m.got, client.FieldManager(ctx))
	return m.Interface.Create(ctx, o)
}

func (m *managers) Update(ctx context.Context, o api.Object) (api.Object, error) {
	m.got = append(m.got, client.FieldManager(ctx))
	return m.Interface.Update(ctx, o)
}

// Apply's writes are skiff's client-side apply in managedFields, as
// kubectl's are kubectl-client-side-apply.
func TestApplyNamesItsFieldManager(t *testing.T) {
	m := &managers{Interface: fake.New()}
	a := &kubectl.Applier{Client: m, Warnings: io.Discard}
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "a", Namespace: "default"}, Data: map[string]string{"k": "1"}}
	k := api.MustKindOf(cm)
	for _, v := range []string{"1", "2"} {
		cm.Data["k"] = v
		if _, err := a.Apply(context.Background(), k, api.Clone(cm), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.got) != 2 || m.got[0] != kubectl.FieldManagerClientSideApply || m.got[1] != kubectl.FieldManagerClientSideApply {
		t.Fatalf("field managers of create and update: %q, want %q twice", m.got, kubectl.FieldManagerClientSideApply)
	}
}
