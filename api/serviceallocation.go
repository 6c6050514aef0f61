package api

// ServiceAllocation is the API server's record of the Service addresses
// (cluster IPs, node ports) that Service writes in progress have taken,
// kept in the store so that every API server sharing it sees them: skiff's
// counterpart of the RangeAllocation objects kube-apiserver keeps in etcd
// and updates with compare-and-swap. There is one, named
// ServiceAllocationName; only the API server writes it. What is allocated
// for good is what the stored Services hold; a reservation lasts from the
// allocation until the Service write is stored or has failed.
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object
type ServiceAllocation struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata,omitempty"`
	// Reservations: the addresses of Service writes not yet stored.
	Reservations []ServiceReservation `json:"reservations,omitempty"`
}

// ServiceAllocationName is the name of the one ServiceAllocation.
const ServiceAllocationName = "services"

// ServiceReservation is the addresses one Service write took.
type ServiceReservation struct {
	// Holder: the id of the write (random, one per create or update).
	Holder string `json:"holder"`
	// Service: NAMESPACE/NAME of the Service written.
	Service string `json:"service"`
	// ClusterIP taken, when the write needs a new one.
	ClusterIP string `json:"clusterIP,omitempty"`
	// NodePorts taken, the ones the write needs anew.
	NodePorts []int32 `json:"nodePorts,omitempty"`
	// Time the addresses were taken, by the clock of the API server that took them.
	Time Time `json:"time"`
}
