package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// Service address allocation: every Service but a headless one gets a
// cluster IP from the service CIDR, and every port of a NodePort Service a
// node port from 30000-32767, either the one asked for (if free) or one
// picked at random.
//
// What is allocated for good is what the stored Services hold: a deleted
// Service frees its IP and ports by being gone, a type change by no longer
// holding them, and a restart starts from the store. Several API servers
// may share one store (etcd), so a Service write takes the new addresses
// it needs in the store's one ServiceAllocation object first, as a
// reservation, with a compare-and-swap (store.GuaranteedUpdate): skiff's
// counterpart of kube-apiserver's RangeAllocation objects. Then it stores
// the Service, then it drops its reservation. An allocation sees as taken
// every address a stored Service holds and every address reserved.
//
// Why two writes through two servers never get one address: their
// reservations are writes of one object on the version they read, so one
// of them, say A's, came first, and B read the allocation object after it.
// If B's read still had A's reservation, B did not pick A's addresses. If
// A had already dropped it, A's Service was stored before (A drops its
// reservation only once its Service write is done), and B lists the
// Services after reading the allocation, at a revision no older than it
// (checked: usedServiceAddresses), so it sees A's Service holding them.
// The one way around it is a reservation taken for stale: one older than
// serviceReservationTTL is dropped by the next allocation, so that a
// server killed between reserving and storing does not keep its addresses
// forever. A Service write that takes longer than that between its
// reservation and its store commit (a store stalled for two minutes) could
// meet a duplicate; the write's own deadline (the request's) is far
// shorter. The TTL is compared with the reserving server's clock: servers
// whose clocks differ by minutes shorten or lengthen it by as much.
//
// The mutex only keeps this server's own Service writes from racing each
// other for the allocation object (retries); correctness is the store's.

// DefaultServiceCIDR is where cluster IPs come from, as in kubeadm; its
// first address (.1) is reserved, for the "kubernetes" service in
// Kubernetes.
const DefaultServiceCIDR = "10.96.0.0/16"

// serviceReservationTTL is how long a reservation is kept for a write that
// never dropped it (its server died in between).
const serviceReservationTTL = 2 * time.Minute

var (
	serviceKind           = api.MustKindOf(&api.Service{})
	serviceAllocationKind = api.MustKindOf(&api.ServiceAllocation{})
)

// serviceAllocator serializes this server's service writes and holds the
// service CIDR.
type serviceAllocator struct {
	mu   sync.Mutex
	cidr netip.Prefix
	// now is the clock of reservations (tests move it).
	now func() time.Time
}

func newServiceAllocator() *serviceAllocator {
	return &serviceAllocator{cidr: netip.MustParsePrefix(DefaultServiceCIDR), now: time.Now}
}

// SetServiceCIDR changes the range cluster IPs come from (IPv4, at most a
// /30 wide enough for a few services). Call it before the registry serves;
// services already stored outside the range keep their IPs. Every API
// server sharing a store must use the same range.
func (r *Registry) SetServiceCIDR(cidr netip.Prefix) error {
	if !cidr.Addr().Is4() || cidr.Bits() > 29 {
		return fmt.Errorf("service CIDR %s: want an IPv4 prefix of /29 or wider", cidr)
	}
	r.services.mu.Lock()
	defer r.services.mu.Unlock()
	r.services.cidr = cidr.Masked()
	return nil
}

// serviceWrite is one create or update of an object, as far as Service
// addresses go: for a Service it holds the allocation lock and names its
// reservation; for other kinds it does nothing.
type serviceWrite struct {
	r        *Registry
	holder   string // "" for other kinds
	reserved bool
}

// serviceWrite begins a write of kind k. The caller calls allocate before
// storing the object and done (deferred) once the store write returned.
func (r *Registry) serviceWrite(k *api.Kind) *serviceWrite {
	if k != serviceKind {
		return &serviceWrite{r: r}
	}
	r.services.mu.Lock()
	return &serviceWrite{r: r, holder: newUID()}
}

// done drops the write's reservation (its Service is stored, or will not
// be) and releases the lock. A reservation it cannot drop (the store is
// down) expires after serviceReservationTTL.
func (w *serviceWrite) done(ctx context.Context) {
	if w.holder == "" {
		return
	}
	defer w.r.services.mu.Unlock()
	if !w.reserved {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := w.r.store.GuaranteedUpdate(ctx, serviceAllocationKind, "", api.ServiceAllocationName, func(cur api.Object) (api.Object, error) {
		a := cur.(*api.ServiceAllocation)
		a.Reservations = slices.DeleteFunc(a.Reservations, func(res api.ServiceReservation) bool { return res.Holder == w.holder })
		return a, nil
	})
	if err != nil {
		w.r.log.Warn("service allocation: reservation not dropped; it expires", "holder", w.holder, "ttl", serviceReservationTTL, "err", err)
	}
}

// allocate fills in obj's cluster IP and node ports and checks the ones
// given; cur is the stored version on update (nil on create). It does
// nothing for other kinds. The addresses obj needs anew (the ones cur does
// not hold already) are reserved in the store before it returns.
func (w *serviceWrite) allocate(ctx context.Context, obj, cur api.Object) error {
	svc, ok := obj.(*api.Service)
	if !ok || w.holder == "" {
		return nil
	}
	self := api.KeyOf(svc)
	var have *api.Service
	if c, ok := cur.(*api.Service); ok {
		have = c
	}
	a := w.r.services
	var picked *api.Service
	var fieldErrs api.FieldErrors
	reserved := false
	err := w.r.ensureServiceAllocation(ctx)
	if err == nil {
		_, err = w.r.store.GuaranteedUpdate(ctx, serviceAllocationKind, "", api.ServiceAllocationName, func(o api.Object) (api.Object, error) {
			rec := o.(*api.ServiceAllocation)
			rv, err := store.ParseRevision(rec.ResourceVersion)
			if err != nil {
				return nil, err
			}
			now := a.now()
			// Drop the stale ones, and this write's own from an
			// attempt of its Service update that lost a race.
			rec.Reservations = slices.DeleteFunc(rec.Reservations, func(res api.ServiceReservation) bool {
				return res.Holder == w.holder || now.Sub(res.Time.Time) > serviceReservationTTL
			})
			usedIPs, usedPorts, err := usedServiceAddresses(ctx, w.r.store, self, rv)
			if err != nil {
				return nil, err
			}
			for _, res := range rec.Reservations {
				if ip, err := netip.ParseAddr(res.ClusterIP); err == nil {
					usedIPs[ip] = true
				}
				for _, p := range res.NodePorts {
					usedPorts[p] = true
				}
			}
			try := api.Clone(svc)
			fieldErrs = nil
			if err := a.allocateIP(try, usedIPs); err != nil {
				fieldErrs = append(fieldErrs, err)
			}
			fieldErrs = append(fieldErrs, allocateNodePorts(try, usedPorts)...)
			if len(fieldErrs) > 0 {
				return nil, errAllocationInvalid
			}
			picked, reserved = try, false
			res := newAddresses(try, have)
			if res.ClusterIP == "" && len(res.NodePorts) == 0 {
				return rec, nil // nothing new: kept what cur holds
			}
			if isDryRun(ctx) {
				return nil, errDryRun // dryrun.go: shown, not reserved
			}
			res.Holder, res.Service, res.Time = w.holder, self, api.Time{Time: now.UTC()}
			rec.Reservations = append(rec.Reservations, res)
			reserved = true
			return rec, nil
		})
	}
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if errors.Is(err, errAllocationInvalid) {
		return api.NewInvalid(serviceKind, svc.Name, fieldErrs)
	}
	if err != nil {
		return fmt.Errorf("allocate for service %s: %w", self, err)
	}
	w.reserved = w.reserved || reserved
	svc.Spec = picked.Spec
	return nil
}

// errAllocationInvalid aborts the allocation's update when the Service's
// addresses are invalid (the field errors are returned beside it).
var errAllocationInvalid = errors.New("service addresses invalid")

// newAddresses is the cluster IP and node ports of svc that have (the
// stored version, or nil) does not hold: what a write must reserve.
func newAddresses(svc, have *api.Service) api.ServiceReservation {
	var res api.ServiceReservation
	ip := svc.Spec.ClusterIP
	if ip != "None" && ip != "" && (have == nil || have.Spec.ClusterIP != ip) {
		res.ClusterIP = ip
	}
	held := map[int32]bool{}
	if have != nil {
		for _, p := range have.Spec.Ports {
			held[p.NodePort] = true
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !held[p.NodePort] {
			res.NodePorts = append(res.NodePorts, p.NodePort)
		}
	}
	return res
}

// ensureServiceAllocation creates the empty allocation object if the
// store has none yet (a new store, or one from before skiff kept it).
func (r *Registry) ensureServiceAllocation(ctx context.Context) error {
	_, err := r.store.Get(ctx, serviceAllocationKind, "", api.ServiceAllocationName)
	if !api.IsNotFound(err) {
		return err
	}
	rec := &api.ServiceAllocation{ObjectMeta: api.ObjectMeta{Name: api.ServiceAllocationName}}
	if _, err := r.store.Create(ctx, rec); err != nil && !api.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// usedServiceAddresses reads the cluster IPs and node ports of every
// stored service but self (namespace/name), at revision atLeast or newer.
func usedServiceAddresses(ctx context.Context, st store.Store, self string, atLeast int64) (map[netip.Addr]bool, map[int32]bool, error) {
	items, rev, err := st.List(ctx, serviceKind, "")
	if err == nil && rev < atLeast {
		// A store must not list older than what it just read; wait
		// for it rather than trust a stale list.
		if err = st.WaitForRevision(ctx, atLeast); err == nil {
			items, _, err = st.List(ctx, serviceKind, "")
		}
	}
	if err != nil {
		return nil, nil, err
	}
	ips, ports := map[netip.Addr]bool{}, map[int32]bool{}
	for _, o := range items {
		s, ok := o.(*api.Service)
		if !ok || api.KeyOf(s) == self {
			continue
		}
		if a, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
			ips[a] = true
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				ports[p.NodePort] = true
			}
		}
	}
	return ips, ports, nil
}

// allocateIP checks a given cluster IP or picks a free one.
func (a *serviceAllocator) allocateIP(svc *api.Service, used map[netip.Addr]bool) *api.FieldError {
	ip := svc.Spec.ClusterIP
	if ip == "" && len(svc.Spec.ClusterIPs) > 0 {
		ip = svc.Spec.ClusterIPs[0]
	}
	switch ip {
	case "None":
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "None", []string{"None"}
		return nil
	case "":
		addr, ok := a.pickIP(used)
		if !ok {
			return api.Invalid("spec.clusterIPs", svc.Spec.ClusterIPs, fmt.Sprintf("range is full: no IP left in %s", a.cidr))
		}
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = addr.String(), []string{addr.String()}
		return nil
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return api.Invalid("spec.clusterIPs[0]", ip, "must be empty, 'None', or a valid IP address")
	}
	if !a.usable(addr) && !(addr == a.cidr.Addr().Next() && api.KeyOf(svc) == kubernetesServiceKey) { // .1 is the kubernetes Service's (serviceaccount_token.go)
		return api.Invalid("spec.clusterIPs[0]", ip, fmt.Sprintf(
			"failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, ip, a.cidr))
	}
	if used[addr] {
		return api.Invalid("spec.clusterIPs[0]", ip, "failed to allocate IP "+ip+": provided IP is already allocated")
	}
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = addr.String(), []string{addr.String()}
	return nil
}

// usable: inside the CIDR, neither its network address, nor the reserved
// first host, nor (IPv4) its broadcast address.
func (a *serviceAllocator) usable(addr netip.Addr) bool {
	if !a.cidr.Contains(addr) {
		return false
	}
	first := a.cidr.Addr()
	return addr != first && addr != first.Next() && addr != lastAddr(a.cidr)
}

// pickIP starts at a random address of the range and takes the first free one.
func (a *serviceAllocator) pickIP(used map[netip.Addr]bool) (netip.Addr, bool) {
	size := 1 << (32 - a.cidr.Bits())
	start := rand.IntN(size)
	base := ipv4ToUint(a.cidr.Addr())
	for i := range size {
		addr := uintToIPv4(base + uint32((start+i)%size))
		if a.usable(addr) && !used[addr] {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// allocateNodePorts checks given node ports of a NodePort service and
// picks the missing ones.
func allocateNodePorts(svc *api.Service, used map[int32]bool) api.FieldErrors {
	if svc.Spec.Type != api.ServiceTypeNodePort {
		return nil
	}
	var errs api.FieldErrors
	mine := map[int32]bool{}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort == 0 {
			continue
		}
		if used[p.NodePort] || mine[p.NodePort] {
			errs = append(errs, api.Invalid(fmt.Sprintf("spec.ports[%d].nodePort", i), p.NodePort, "provided port is already allocated"))
		}
		mine[p.NodePort] = true
	}
	if len(errs) > 0 {
		return errs
	}
	const size = api.NodePortMax - api.NodePortMin + 1
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort != 0 {
			continue
		}
		start := rand.IntN(size)
		for j := range size {
			n := int32(api.NodePortMin + (start+j)%size)
			if !used[n] && !mine[n] {
				p.NodePort, mine[n] = n, true
				break
			}
		}
		if p.NodePort == 0 {
			errs = append(errs, api.Invalid(fmt.Sprintf("spec.ports[%d].nodePort", i), 0, "range is full: no node port left"))
		}
	}
	return errs
}

func ipv4ToUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintToIPv4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func lastAddr(p netip.Prefix) netip.Addr {
	return uintToIPv4(ipv4ToUint(p.Addr()) | (1<<(32-p.Bits()) - 1))
}
