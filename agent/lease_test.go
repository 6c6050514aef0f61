package agent

import (
	"errors"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	rtfake "skiff.dev/skiff/runtime/fake"
)

func leaseOf(t *testing.T, c *fake.Client) *api.Lease {
	t.Helper()
	o, err := c.Get(t.Context(), api.MustKindOf(&api.Lease{}), api.NamespaceNodeLease, testNode)
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return o.(*api.Lease)
}

func strp(s string) *string { return &s }

// The first renewal creates kube-node-lease/NODE as the kubelet does
// (holder, 40 s, renewTime, no acquireTime, owned by the Node); later
// renewals move renewTime on; a lease held by someone else is taken over
// and the transition counted.
func TestRenewLease(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 123456000, time.UTC)
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: testNode, UID: "node-uid"}}
	for _, tc := range []struct {
		name            string
		existing        *api.Lease
		wantTransitions int32 // -1: unset
		wantAcquire     bool
	}{
		{name: "no lease yet", wantTransitions: -1},
		{name: "our lease", existing: &api.Lease{
			ObjectMeta: api.ObjectMeta{Name: testNode, Namespace: api.NamespaceNodeLease},
			Spec:       api.LeaseSpec{HolderIdentity: strp(testNode), RenewTime: &api.MicroTime{Time: t0.Add(-time.Hour)}},
		}, wantTransitions: -1},
		{name: "held by another", existing: &api.Lease{
			ObjectMeta: api.ObjectMeta{Name: testNode, Namespace: api.NamespaceNodeLease},
			Spec:       api.LeaseSpec{HolderIdentity: strp("old-node"), LeaseTransitions: new(int32(2))},
		}, wantTransitions: 3, wantAcquire: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []api.Object{node}
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			c := fake.New(objs...)
			a, err := New(testConfig(t), c, rtfake.New(rtfake.DefaultConfig()))
			if err != nil {
				t.Fatal(err)
			}
			for i, now := range []time.Time{t0, t0.Add(leaseRenewInterval)} {
				if err := a.renewLease(t.Context(), now); err != nil {
					t.Fatalf("renewal %d: %v", i, err)
				}
				l := leaseOf(t, c)
				if h := l.Spec.HolderIdentity; h == nil || *h != testNode {
					t.Errorf("renewal %d: holderIdentity %v, want %s", i, h, testNode)
				}
				if d := l.Spec.LeaseDurationSeconds; d == nil || *d != 40 {
					t.Errorf("renewal %d: leaseDurationSeconds %v, want 40", i, d)
				}
				if r := l.Spec.RenewTime; r == nil || !r.Equal(now) {
					t.Errorf("renewal %d: renewTime %v, want %v", i, r, now)
				}
				if got := l.Spec.AcquireTime != nil; got != tc.wantAcquire {
					t.Errorf("renewal %d: acquireTime %v, want set %v", i, l.Spec.AcquireTime, tc.wantAcquire)
				} else if got && !l.Spec.AcquireTime.Equal(t0) {
					t.Errorf("renewal %d: acquireTime %v, want the takeover's %v", i, l.Spec.AcquireTime, t0)
				}
				switch tr := l.Spec.LeaseTransitions; {
				case tc.wantTransitions < 0 && tr != nil:
					t.Errorf("renewal %d: leaseTransitions %d, want unset", i, *tr)
				case tc.wantTransitions >= 0 && (tr == nil || *tr != tc.wantTransitions):
					t.Errorf("renewal %d: leaseTransitions %v, want %d", i, tr, tc.wantTransitions)
				}
				if refs := l.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != "node-uid" {
					t.Errorf("renewal %d: ownerReferences %+v, want the Node", i, refs)
				}
			}
		})
	}
}

// A failed write is reported, and the next renewal succeeds.
func TestRenewLeaseAfterError(t *testing.T) {
	c := fake.New(&api.Node{ObjectMeta: api.ObjectMeta{Name: testNode}})
	broken := true
	c.Intercept(func(a fake.Action) error {
		if broken && a.Kind == "Lease" && a.IsWrite() {
			return errors.New("etcd is on fire")
		}
		return nil
	})
	a, err := New(testConfig(t), c, rtfake.New(rtfake.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.renewLease(t.Context(), time.Now()); err == nil {
		t.Fatal("renewal with a failing API: no error")
	}
	broken = false
	if err := a.renewLease(t.Context(), time.Now()); err != nil {
		t.Fatalf("renewal after recovery: %v", err)
	}
	leaseOf(t, c)
}
