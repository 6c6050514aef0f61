package api

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation"
)

// EndpointSlice lists some of the endpoints (pod addresses) behind a
// Service (discovery.k8s.io/v1): the successor of Endpoints, which real
// clusters read today (`kubectl describe svc` prints its Endpoints line
// from the slices). skiff's endpointslice controller keeps one slice per
// Service with a selector, labelled kubernetes.io/service-name, next to
// the Endpoints object the service proxy reads.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type EndpointSlice struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// AddressType of every address in the slice: IPv4, IPv6 or FQDN.
	// Immutable.
	AddressType string `json:"addressType"`
	// Endpoints are the addresses, each with its readiness.
	Endpoints []Endpoint `json:"endpoints"`
	// Ports every endpoint of the slice serves. Empty means no ports were
	// declared; a port with no number means "all ports".
	Ports []EndpointSlicePort `json:"ports"`
}

// Endpoint is one backend of a Service: a pod's address.
type Endpoint struct {
	// Addresses of the endpoint (one pod IP), of the slice's addressType.
	Addresses []string `json:"addresses"`
	// Conditions: ready, serving, terminating.
	Conditions EndpointConditions `json:"conditions,omitempty"`
	// NodeName is the node the endpoint runs on.
	NodeName *string `json:"nodeName,omitempty"`
	// TargetRef is the pod behind the endpoint.
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

// EndpointConditions say whether an endpoint should get traffic.
type EndpointConditions struct {
	// Ready: the pod is ready and not terminating (traffic goes here).
	Ready *bool `json:"ready,omitempty"`
	// Serving: the pod is ready, whether terminating or not.
	Serving *bool `json:"serving,omitempty"`
	// Terminating: the pod is being deleted.
	Terminating *bool `json:"terminating,omitempty"`
}

// EndpointSlicePort is one port of the endpoints of a slice.
type EndpointSlicePort struct {
	// Name of the service port it serves ("" for a single unnamed port).
	Name *string `json:"name,omitempty"`
	// Protocol: TCP (default), UDP or SCTP.
	Protocol *string `json:"protocol,omitempty"`
	// Port number on the endpoints.
	Port *int32 `json:"port,omitempty"`
}

// EndpointSlice labels and address types, as Kubernetes (discovery/v1).
const (
	// LabelServiceName names the Service a slice belongs to.
	LabelServiceName = "kubernetes.io/service-name"
	// LabelManagedBy names the controller that manages a slice.
	LabelManagedBy = "endpointslice.kubernetes.io/managed-by"
	// EndpointSliceControllerName is the value of LabelManagedBy on the
	// slices skiff's controller writes.
	EndpointSliceControllerName = "endpointslice-controller.k8s.io"

	AddressTypeIPv4 = "IPv4"
	AddressTypeIPv6 = "IPv6"
	AddressTypeFQDN = "FQDN"
)

// validateEndpointSlice follows pkg/apis/discovery/validation in the
// rules skiff needs: a known addressType, addresses of that type, valid
// ports.
func validateEndpointSlice(s *EndpointSlice) FieldErrors {
	errs := validateMeta(&s.ObjectMeta, true, isDNS1123Subdomain)
	switch s.AddressType {
	case AddressTypeIPv4, AddressTypeIPv6, AddressTypeFQDN:
	case "":
		errs = append(errs, Required("addressType", ""))
	default:
		errs = append(errs, NotSupported("addressType", s.AddressType, AddressTypeIPv4, AddressTypeIPv6, AddressTypeFQDN))
	}
	for i, e := range s.Endpoints {
		p := fmt.Sprintf("endpoints[%d].addresses", i)
		switch {
		case len(e.Addresses) == 0:
			errs = append(errs, Required(p, "must contain at least 1 address"))
		case len(e.Addresses) > 100:
			errs = append(errs, Invalid(p, len(e.Addresses), "must have at most 100 items"))
		}
		for j, a := range e.Addresses {
			ap := fmt.Sprintf("%s[%d]", p, j)
			switch s.AddressType {
			case AddressTypeIPv4, AddressTypeIPv6:
				ip, err := netip.ParseAddr(a)
				switch {
				case err != nil:
					errs = append(errs, Invalid(ap, a, "must be a valid IP address"))
				case s.AddressType == AddressTypeIPv4 && !ip.Is4():
					errs = append(errs, Invalid(ap, a, "must be a valid IPv4 address"))
				case s.AddressType == AddressTypeIPv6 && !ip.Is6():
					errs = append(errs, Invalid(ap, a, "must be a valid IPv6 address"))
				}
			case AddressTypeFQDN:
				for _, msg := range validation.IsFullyQualifiedDomainName(nil, a) {
					errs = append(errs, Invalid(ap, a, msg.Detail))
				}
			}
		}
		if n := e.NodeName; n != nil {
			for _, msg := range isDNS1123Subdomain(*n) {
				errs = append(errs, Invalid(fmt.Sprintf("endpoints[%d].nodeName", i), *n, msg))
			}
		}
	}
	if len(s.Ports) > 20000 {
		errs = append(errs, Invalid("ports", len(s.Ports), "must have at most 20000 items"))
	}
	seen := map[string]bool{}
	for i, p := range s.Ports {
		pp := fmt.Sprintf("ports[%d]", i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			for _, msg := range validation.IsValidPortName(name) {
				errs = append(errs, Invalid(pp+".name", name, msg))
			}
		}
		if seen[name] {
			errs = append(errs, Duplicate(pp+".name", name))
		}
		seen[name] = true
		if p.Protocol != nil {
			switch *p.Protocol {
			case ProtocolTCP, "UDP", "SCTP":
			default:
				errs = append(errs, NotSupported(pp+".protocol", *p.Protocol, ProtocolTCP, "UDP", "SCTP"))
			}
		}
		if p.Port != nil {
			errs = append(errs, validatePortNum(int64(*p.Port), pp+".port")...)
		}
	}
	return errs
}

// defaultEndpointSlice: a port's protocol is TCP, as Kubernetes.
func defaultEndpointSlice(s *EndpointSlice) {
	for i := range s.Ports {
		if s.Ports[i].Protocol == nil {
			tcp := ProtocolTCP
			s.Ports[i].Protocol = &tcp
		}
	}
}
