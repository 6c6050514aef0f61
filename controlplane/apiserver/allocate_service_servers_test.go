package apiserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
)

// Several API servers share one store (etcd; or, in a test, one bbolt
// store): their registries must never give one address twice.

// sharedStores returns, per store implementation, a function that opens
// two stores seeing the same new data: two etcd stores (two servers'
// clients) on one new member, or one new bbolt store twice.
func sharedStores() map[string]func(t *testing.T) [2]store.Store {
	return map[string]func(t *testing.T) [2]store.Store{
		"bbolt": func(t *testing.T) [2]store.Store {
			bolt := defaultsStore(t, store.Options{NoSync: true})
			return [2]store.Store{bolt, bolt}
		},
		"etcd": func(t *testing.T) [2]store.Store {
			cli := etcdtest.Start(t, "services").Client()
			var etcds [2]store.Store
			for i := range etcds {
				s, err := etcdstore.New(context.Background(), cli, etcdstore.DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				etcds[i] = s
			}
			return etcds
		},
	}
}

// twoRegistries is two API servers' registries over st.
func twoRegistries(t *testing.T, st [2]store.Store, cidr string) [2]*Registry {
	t.Helper()
	var regs [2]*Registry
	for i := range regs {
		regs[i] = NewRegistry(st[i], nil)
		if err := regs[i].EnsureDefaults(t.Context()); err != nil {
			t.Fatal(err)
		}
		if cidr != "" {
			if err := regs[i].SetServiceCIDR(netip.MustParsePrefix(cidr)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return regs
}

// createAll creates svcs at once, service i through regs[i%2], and returns
// each create's result.
func createAll(regs [2]*Registry, svcs []*api.Service) ([]*api.Service, []error) {
	out, errs := make([]*api.Service, len(svcs)), make([]error, len(svcs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range svcs {
		wg.Go(func() {
			<-start
			o, err := regs[i%2].Create(context.Background(), serviceKind, s)
			if err == nil {
				out[i] = o.(*api.Service)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	return out, errs
}

func TestServiceAllocationAcrossServers(t *testing.T) {
	for name, open := range sharedStores() {
		t.Run(name, func(t *testing.T) {
			t.Run("RandomAddressesFillTheRange", func(t *testing.T) {
				st := open(t)
				// A /28 has 13 usable addresses: 13 creates at once
				// through two servers must get all 13, each once.
				regs := twoRegistries(t, st, "10.100.0.0/28")
				const n = 13
				var svcs []*api.Service
				for i := range n {
					svcs = append(svcs, newService(fmt.Sprintf("fill-%d", i), api.ServiceTypeNodePort, api.ServicePort{Name: "a", Port: 80}, api.ServicePort{Name: "b", Port: 81}))
				}
				out, errs := createAll(regs, svcs)
				ips, ports := map[string]string{}, map[int32]string{}
				for i, err := range errs {
					if err != nil {
						t.Fatalf("create %s: %v", svcs[i].Name, err)
					}
					s := out[i]
					if other, ok := ips[s.Spec.ClusterIP]; ok {
						t.Errorf("clusterIP %s given to %s and %s", s.Spec.ClusterIP, other, s.Name)
					}
					ips[s.Spec.ClusterIP] = s.Name
					for _, p := range s.Spec.Ports {
						if other, ok := ports[p.NodePort]; ok {
							t.Errorf("nodePort %d given to %s and %s", p.NodePort, other, s.Name)
						}
						ports[p.NodePort] = s.Name
					}
				}
				for i := range regs {
					if _, err := createService(t, regs[i], newService(fmt.Sprintf("extra-%d", i), "")); err == nil || !strings.Contains(err.Error(), "range is full") {
						t.Errorf("server %d: 14th create: err %v, want range is full", i, err)
					}
				}
				assertNoReservations(t, st[0])
			})
			t.Run("OneWinsAGivenAddress", func(t *testing.T) {
				// Ten creates at once ask for the same IP and node port:
				// exactly one gets them, the others fail as taken.
				st := open(t)
				regs := twoRegistries(t, st, "")
				const n = 10
				var svcs []*api.Service
				for i := range n {
					s := newService(fmt.Sprintf("given-%d", i), api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30100})
					if i%2 == 0 {
						s.Spec.ClusterIP = "10.96.7.7" // and the others a random one
					}
					svcs = append(svcs, s)
				}
				_, errs := createAll(regs, svcs)
				won := 0
				for i, err := range errs {
					switch {
					case err == nil:
						won++
					case api.IsInvalid(err) && strings.Contains(err.Error(), "already allocated"):
					default:
						t.Errorf("create %s: %v, want success or already allocated", svcs[i].Name, err)
					}
				}
				if won != 1 {
					t.Errorf("%d creates got node port 30100, want 1", won)
				}
				assertNoReservations(t, st[1])
			})
		})
	}
}

// assertNoReservations: every write dropped its reservation.
func assertNoReservations(t *testing.T, st store.Store) {
	t.Helper()
	o, err := st.Get(t.Context(), serviceAllocationKind, "", api.ServiceAllocationName)
	if err != nil {
		t.Fatal(err)
	}
	if res := o.(*api.ServiceAllocation).Reservations; len(res) > 0 {
		t.Errorf("reservations left: %+v", res)
	}
}

// A reservation whose write never ended (its server was killed) keeps its
// addresses for serviceReservationTTL, then is dropped.
func TestServiceReservationExpires(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.reg.services.now = func() time.Time { return now }
	// The dead server's reservation.
	rec := &api.ServiceAllocation{ObjectMeta: api.ObjectMeta{Name: api.ServiceAllocationName}, Reservations: []api.ServiceReservation{{
		Holder: "dead", Service: "default/ghost", ClusterIP: "10.96.0.10", NodePorts: []int32{30080}, Time: api.Time{Time: now.Add(-time.Minute)},
	}}}
	if _, err := e.st.Create(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		ip       string
		nodePort int32
		after    time.Duration // since the reservation
		wantErr  string
	}{
		{name: "reserved IP", ip: "10.96.0.10", after: time.Minute, wantErr: "spec.clusterIPs[0]: Invalid value: \"10.96.0.10\": failed to allocate IP 10.96.0.10: provided IP is already allocated"},
		{name: "reserved node port", nodePort: 30080, after: time.Minute, wantErr: "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"},
		{name: "IP after the TTL", ip: "10.96.0.10", after: serviceReservationTTL + time.Second},
		{name: "node port after the TTL", nodePort: 30080, after: serviceReservationTTL + time.Second},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = rec.Reservations[0].Time.Add(tt.after)
			s := newService(fmt.Sprintf("s%d", i), api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: tt.nodePort})
			s.Spec.ClusterIP = tt.ip
			out, err := createService(t, e.reg, s)
			if tt.wantErr != "" {
				if err == nil || !api.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want Invalid with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.reg.Delete(t.Context(), serviceKind, out.Namespace, out.Name, api.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	assertNoReservations(t, e.st)
}

// A create that fails after its allocation (the name is taken) leaves no
// reservation behind, and the addresses it took are free again.
func TestServiceReservationDroppedOnFailedCreate(t *testing.T) {
	e := newEnv(t)
	a := newService("a", api.ServiceTypeNodePort, api.ServicePort{Port: 80})
	mustCreateService(t, e.reg, a)
	again := newService("a", api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30200})
	again.Spec.ClusterIP = "10.96.0.20"
	if _, err := createService(t, e.reg, again); !api.IsAlreadyExists(err) {
		t.Fatalf("err %v, want AlreadyExists", err)
	}
	assertNoReservations(t, e.st)
	b := newService("b", api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30200})
	b.Spec.ClusterIP = "10.96.0.20"
	mustCreateService(t, e.reg, b)
}
