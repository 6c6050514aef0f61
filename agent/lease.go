package agent

import (
	"context"
	"fmt"
	"time"

	"skiff.dev/skiff/api"
)

// The node lease, as the kubelet's (pkg/kubelet/nodelease): the agent
// holds the Lease kube-node-lease/NODE, with leaseDurationSeconds 40, and
// renews it every 10 seconds (a quarter of the duration). The renewal is
// the node's heartbeat made visible: `kubectl get leases -n
// kube-node-lease` shows its age, `kubectl describe node` its holder and
// renew time. The Lease is owned by the Node (an owner reference), so it
// goes with the Node.
//
// The Ready condition's lastHeartbeatTime (heartbeat in agent.go) is still
// written every HeartbeatInterval and is what the node lifecycle
// controller reads; the Lease is renewed alongside it.

// leaseRenewInterval is the kubelet's: 0.25 × leaseDurationSeconds.
const leaseRenewInterval = api.NodeLeaseDurationSeconds * time.Second / 4

// leaseLoop renews the node lease every leaseRenewInterval until ctx ends.
func (a *Agent) leaseLoop(ctx context.Context) {
	t := time.NewTicker(leaseRenewInterval)
	defer t.Stop()
	for {
		if err := a.renewLease(ctx, time.Now()); err != nil && ctx.Err() == nil {
			a.log.Warn("renew node lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease creates the node's Lease, or sets its renewTime to now (and
// takes it over, counting a transition, if another holder had it). A
// Conflict is left to the next renewal, 10 seconds later: a lease that
// misses one renewal is still 30 seconds from expiring.
func (a *Agent) renewLease(ctx context.Context, now time.Time) error {
	leaseKind := api.MustKindOf(&api.Lease{})
	nodeName := a.cfg.NodeName
	renew := api.MicroTime{Time: now.UTC()}
	o, err := a.c.Get(ctx, leaseKind, api.NamespaceNodeLease, nodeName)
	if api.IsNotFound(err) {
		l := &api.Lease{}
		l.Name, l.Namespace = nodeName, api.NamespaceNodeLease
		l.Spec = api.LeaseSpec{
			HolderIdentity:       new(nodeName),
			LeaseDurationSeconds: new(int32(api.NodeLeaseDurationSeconds)),
			RenewTime:            &renew,
		}
		a.setLeaseOwner(ctx, l)
		if _, err := a.c.Create(ctx, l); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create lease %s/%s: %w", api.NamespaceNodeLease, nodeName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease %s/%s: %w", api.NamespaceNodeLease, nodeName, err)
	}
	l := api.Clone(o.(*api.Lease))
	if h := l.Spec.HolderIdentity; h == nil || *h != nodeName {
		// Someone else held it (or nobody): take it over, as the kubelet.
		n := int32(0)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions
		}
		if h != nil && *h != "" {
			n++
		}
		l.Spec.HolderIdentity, l.Spec.LeaseTransitions = new(nodeName), &n
		l.Spec.AcquireTime = &renew
	}
	l.Spec.LeaseDurationSeconds = new(int32(api.NodeLeaseDurationSeconds))
	l.Spec.RenewTime = &renew
	if len(l.OwnerReferences) == 0 {
		a.setLeaseOwner(ctx, l)
	}
	if _, err := a.c.Update(ctx, l); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", api.NamespaceNodeLease, nodeName, err)
	}
	return nil
}

// setLeaseOwner makes the Node the owner of its Lease, as the kubelet
// does; a Node not readable yet leaves the Lease without an owner (the
// next renewal adds it).
func (a *Agent) setLeaseOwner(ctx context.Context, l *api.Lease) {
	o, err := a.c.Get(ctx, api.MustKindOf(&api.Node{}), "", a.cfg.NodeName)
	if err != nil {
		return
	}
	n := o.(*api.Node)
	l.OwnerReferences = []api.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
}
