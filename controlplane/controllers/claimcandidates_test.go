package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// claimCandidates reads an informer index instead of listing the whole
// namespace: through random adoptions, releases, relabels and deletions,
// for every owner it must give exactly what the namespace's list gives
// once what claim never takes (another controller's objects) is dropped,
// in the same order.
func TestClaimCandidatesAreWhatTheNamespaceListGives(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 3))
	owners := []*api.ReplicaSet{}
	for _, o := range []struct{ ns, name string }{{"x", "a"}, {"x", "b"}, {"y", "a"}} {
		rs := &api.ReplicaSet{ObjectMeta: api.ObjectMeta{Namespace: o.ns, Name: o.name, UID: "uid-" + o.ns + "-" + o.name}}
		api.SetTypeMeta(rs)
		owners = append(owners, rs)
	}
	c := fake.New()
	podKind := api.MustKindOf(&api.Pod{})
	inf := client.NewInformer(c, podKind, "", api.ListOptions{}, nil)
	indexControllers(inf)
	runCtx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	// withOwner sets p's controller to owner (nil: an orphan); a pod of
	// x whose controller is y's owner (or the reverse) is controlled by no
	// owner of its namespace.
	withOwner := func(p *api.Pod, owner *api.ReplicaSet) {
		p.OwnerReferences = nil
		if owner != nil {
			p.OwnerReferences = []api.OwnerReference{controllerRef(owner)}
		}
	}
	names := map[string]bool{}
	c.ChurnPods(t, inf, fake.Churn{Rand: rng, Namespaces: []string{"x", "y"}, Names: 40, Steps: 300, Every: 20,
		New: func(ns, name string) *api.Pod {
			p := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
				Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
			api.SetTypeMeta(p)
			if rng.IntN(3) > 0 {
				withOwner(p, owners[rng.IntN(len(owners))])
			}
			names[ns+"/"+name] = true
			return p
		},
		Change: func(p *api.Pod) { // adopted, released, handed over or relabelled
			switch rng.IntN(3) {
			case 0:
				withOwner(p, nil)
			case 1:
				withOwner(p, owners[rng.IntN(len(owners))])
			default:
				p.Labels = map[string]string{"app": fmt.Sprint(rng.IntN(3))}
			}
		},
		Check: func(step int) {
			for _, owner := range owners {
				var fromList []string
				for _, p := range listAs[*api.Pod](inf.ListBy(nil, owner.Namespace)) {
					if ref := api.ControllerOf(p); ref == nil || ref.UID == owner.UID {
						fromList = append(fromList, p.Name)
					}
				}
				var fromIndex []string
				for _, p := range claimCandidates[*api.Pod](inf, owner) {
					fromIndex = append(fromIndex, p.Name)
				}
				if !slices.Equal(fromIndex, fromList) {
					t.Fatalf("step %d, owner %s/%s: candidates %v, the namespace's list gives %v", step, owner.Namespace, owner.Name, fromIndex, fromList)
				}
			}
		},
	})
	if len(names) < 40 {
		t.Fatalf("only %d pods were ever made", len(names))
	}
}
