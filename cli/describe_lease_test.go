package cli

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// describe node shows the node's heartbeat Lease as kubectl does, and says
// so when there is none.
func TestDescribeNodeLease(t *testing.T) {
	n := &api.Node{ObjectMeta: meta("", "node-1", time.Hour)}
	renew := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	holder := "node-1"
	l := &api.Lease{ObjectMeta: meta(api.NamespaceNodeLease, "node-1", time.Hour),
		Spec: api.LeaseSpec{HolderIdentity: &holder, RenewTime: &api.MicroTime{Time: renew}}}
	res := run(t, newFake(n, l), "", "describe", "node", "node-1")
	wantContainsLoose(t, res.out, "Unschedulable: false\nLease:\n  HolderIdentity: node-1\n  AcquireTime: <unset>\n  RenewTime: Fri, 01 May 2026 10:00:00 +0000\nAddresses:")

	res = run(t, newFake(n), "", "describe", "node", "node-1")
	wantContainsLoose(t, res.out, `Lease: Failed to get lease: leases.coordination.k8s.io "node-1" not found`)
}
