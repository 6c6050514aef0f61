package plugins

import (
	"context"
	"log/slog"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// affinityTerm is a PodAffinityTerm made ready to match pods: the
// namespaces it looks in, its label selector (with matchLabelKeys and
// mismatchLabelKeys resolved against the term's owner) and its topology key.
type affinityTerm struct {
	namespaces  map[string]bool
	nsSelector  labels.Selector // nil: only namespaces; Everything for {}
	selector    labels.Selector
	topologyKey string
	weight      int64 // preferred terms; required ones of existing pods: hardPodAffinityWeight
}

// newAffinityTerm processes term of owner, as Kubernetes'
// NewAffinityTerm: no namespaces and no namespaceSelector mean the
// owner's namespace; a nil labelSelector matches no pod.
func newAffinityTerm(owner *api.Pod, t *api.PodAffinityTerm, weight int64) (*affinityTerm, error) {
	sel, err := t.LabelSelector.AsSelector()
	if err != nil {
		return nil, err
	}
	if t.LabelSelector != nil {
		for _, k := range t.MatchLabelKeys {
			if v, ok := owner.Labels[k]; ok {
				r, err := labels.NewRequirement(k, selection.In, []string{v})
				if err != nil {
					return nil, err
				}
				sel = sel.Add(*r)
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := owner.Labels[k]; ok {
				r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
				if err != nil {
					return nil, err
				}
				sel = sel.Add(*r)
			}
		}
	}
	at := &affinityTerm{selector: sel, topologyKey: t.TopologyKey, weight: weight, namespaces: map[string]bool{}}
	for _, ns := range t.Namespaces {
		at.namespaces[ns] = true
	}
	if t.NamespaceSelector != nil {
		if at.nsSelector, err = t.NamespaceSelector.AsSelector(); err != nil {
			return nil, err
		}
	} else if len(t.Namespaces) == 0 {
		at.namespaces[owner.Namespace] = true
	}
	return at, nil
}

// matches reports whether pod is in the term's namespaces and matches its
// selector (topology aside).
func (t *affinityTerm) matches(pod *api.Pod, ns namespaceLabels) bool {
	if !t.namespaces[pod.Namespace] {
		if t.nsSelector == nil || !t.nsSelector.Matches(labels.Set(ns.labels(pod.Namespace))) {
			return false
		}
	}
	return t.selector.Matches(labels.Set(pod.Labels))
}

func requiredTerms(owner *api.Pod, terms []api.PodAffinityTerm, weight int64) ([]*affinityTerm, error) {
	var out []*affinityTerm
	for i := range terms {
		t, err := newAffinityTerm(owner, &terms[i], weight)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func weightedTerms(owner *api.Pod, terms []api.WeightedPodAffinityTerm) ([]*affinityTerm, error) {
	var out []*affinityTerm
	for i := range terms {
		t, err := newAffinityTerm(owner, &terms[i].PodAffinityTerm, int64(terms[i].Weight))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// namespaceLabels knows each namespace's labels, for namespaceSelector.
type namespaceLabels interface {
	labels(ns string) map[string]string
}

// namespaces watches Namespaces for their labels (InterPodAffinity's
// namespaceSelector).
type namespaces struct {
	inf        *client.Informer
	informers  *client.InformerFactory
	own        bool          // informers made here: run runs and waits for them
	registered chan struct{} // closed once run's handlers are on inf (by then filled)
	mu         sync.RWMutex
	by         map[string]map[string]string
	sink       framework.EventSink // nil: moved
}

func newNamespaces(c client.Interface, f *client.InformerFactory, log *slog.Logger) *namespaces {
	n := &namespaces{by: map[string]map[string]string{}, registered: make(chan struct{})}
	if c == nil {
		return n
	}
	n.informers, n.own = informersOf(c, f, log)
	n.inf = n.informers.InformerFor(&api.Namespace{})
	return n
}

func (n *namespaces) labels(ns string) map[string]string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.by[ns]
}

// run keeps the labels until ctx ends; its handlers leave the (shared)
// informer then.
func (n *namespaces) run(ctx context.Context, moved func()) {
	if n.inf == nil {
		return
	}
	set := func(o api.Object) {
		ns := o.(*api.Namespace)
		n.mu.Lock()
		n.by[ns.Name] = ns.Labels
		n.mu.Unlock()
	}
	reg := n.inf.AddHandler(client.Handler{OnAdd: set, OnUpdate: func(o, c api.Object) {
		set(c)
		// A namespace's labels changing may let a pod with a namespaceSelector fit.
		if maps.Equal(o.(*api.Namespace).Labels, c.(*api.Namespace).Labels) {
			return
		}
		if n.sink != nil {
			n.sink(framework.ClusterEvent{Resource: framework.Namespace, ActionType: framework.UpdateOther}, o, c)
			return
		}
		moved()
	}, OnDelete: func(o api.Object) {
		n.mu.Lock()
		delete(n.by, o.(*api.Namespace).Name)
		n.mu.Unlock()
	}})
	close(n.registered)
	n.informers.Start(ctx) // a no-op when the scheduler started them
	<-ctx.Done()
	n.inf.RemoveHandler(reg)
	if n.own {
		n.informers.Wait()
	}
}

func (n *namespaces) waitForSync(ctx context.Context) bool {
	if n.inf == nil {
		return true
	}
	select {
	case <-n.registered:
	case <-ctx.Done():
		return false
	}
	return n.inf.WaitForSync(ctx)
}
