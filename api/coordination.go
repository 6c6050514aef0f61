package api

// Lease is a lock with a holder and an expiry (coordination.k8s.io/v1).
// Every node agent holds the Lease kube-node-lease/NODE and renews it
// every 10 seconds: that renewal is the node's heartbeat, the cheap one
// (a Node status write is far bigger), which `kubectl get leases -n
// kube-node-lease` and the Lease block of `kubectl describe node` show.
// A Lease whose renewTime is older than leaseDurationSeconds belongs to a
// node that stopped answering.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type Lease struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Spec: who holds the lease and until when.
	Spec LeaseSpec `json:"spec,omitempty"`
}

// LeaseSpec is the state of a lease.
type LeaseSpec struct {
	// HolderIdentity names the current holder (for a node lease, the node).
	HolderIdentity *string `json:"holderIdentity,omitempty"`
	// LeaseDurationSeconds is how long others wait after renewTime before
	// they count the lease as expired (a node's: 40).
	LeaseDurationSeconds *int32 `json:"leaseDurationSeconds,omitempty"`
	// AcquireTime is when the current holder took the lease.
	AcquireTime *MicroTime `json:"acquireTime,omitempty"`
	// RenewTime is when the holder last renewed the lease.
	RenewTime *MicroTime `json:"renewTime,omitempty"`
	// LeaseTransitions counts the changes of holder.
	LeaseTransitions *int32 `json:"leaseTransitions,omitempty"`
}

// Node leases, as the kubelet's (pkg/kubelet/nodelease).
const (
	// NamespaceNodeLease holds one Lease per node, named as the node.
	NamespaceNodeLease = "kube-node-lease"
	// NodeLeaseDurationSeconds is the kubelet's default nodeLeaseDurationSeconds.
	NodeLeaseDurationSeconds = 40
)

// validateLease follows pkg/apis/coordination/validation: positive
// durations, non-negative transitions.
func validateLease(l *Lease) FieldErrors {
	errs := validateMeta(&l.ObjectMeta, true, isDNS1123Subdomain)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, Invalid("spec.leaseDurationSeconds", *d, "must be greater than 0"))
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, Invalid("spec.leaseTransitions", *t, "must be greater than or equal to 0"))
	}
	return errs
}
