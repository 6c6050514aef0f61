package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// Service address allocation: every Service but a headless one gets a
// cluster IP from the service CIDR, and every port of a NodePort Service a
// node port from 30000-32767, either the one asked for (if free) or one
// picked at random.
//
// The allocator keeps no table of its own: what is allocated is what the
// stored services hold, read from the store at each allocation. So nothing
// can leak (a deleted service frees its IP and ports by being gone, and a
// restart starts from the store), at the cost of one list of services per
// service write (there are few). The mutex is held from that read until
// the write is stored, so two writes cannot take the same address.

// DefaultServiceCIDR is where cluster IPs come from, as in kubeadm; its
// first address (.1) is reserved, for the "kubernetes" service in
// Kubernetes.
const DefaultServiceCIDR = "10.96.0.0/16"

var serviceKind = api.MustKindOf(&api.Service{})

// serviceAllocator serializes service writes and holds the service CIDR.
type serviceAllocator struct {
	mu   sync.Mutex
	cidr netip.Prefix
}

func newServiceAllocator() *serviceAllocator {
	return &serviceAllocator{cidr: netip.MustParsePrefix(DefaultServiceCIDR)}
}

// SetServiceCIDR changes the range cluster IPs come from (IPv4, at most a
// /30 wide enough for a few services). Call it before the registry serves;
// services already stored outside the range keep their IPs.
func (r *Registry) SetServiceCIDR(cidr netip.Prefix) error {
	if !cidr.Addr().Is4() || cidr.Bits() > 29 {
		return fmt.Errorf("service CIDR %s: want an IPv4 prefix of /29 or wider", cidr)
	}
	r.services.mu.Lock()
	defer r.services.mu.Unlock()
	r.services.cidr = cidr.Masked()
	return nil
}

// lockServices takes the allocation lock for writes of kind k (only
// Services) and returns its unlock.
func (r *Registry) lockServices(k *api.Kind) func() {
	if k != serviceKind {
		return func() {}
	}
	r.services.mu.Lock()
	return r.services.mu.Unlock
}

// allocateService fills in obj's cluster IP and node ports and checks the
// ones given; cur is the stored version on update (nil on create). It does
// nothing for other kinds. The caller holds lockServices until obj is stored.
func (r *Registry) allocateService(ctx context.Context, obj, cur api.Object) error {
	svc, ok := obj.(*api.Service)
	if !ok {
		return nil
	}
	usedIPs, usedPorts, err := usedServiceAddresses(ctx, r.store, api.KeyOf(svc))
	if err != nil {
		return fmt.Errorf("allocate for service %s: %w", api.KeyOf(svc), err)
	}
	var errs api.FieldErrors
	if err := r.services.allocateIP(svc, usedIPs); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, allocateNodePorts(svc, usedPorts)...)
	if len(errs) > 0 {
		return api.NewInvalid(serviceKind, svc.Name, errs)
	}
	return nil
}

// usedServiceAddresses reads the cluster IPs and node ports of every
// stored service but self (namespace/name).
func usedServiceAddresses(ctx context.Context, st store.Store, self string) (map[netip.Addr]bool, map[int32]bool, error) {
	items, _, err := st.List(ctx, serviceKind, "")
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
	if !a.usable(addr) {
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
