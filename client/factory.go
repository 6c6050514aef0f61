package client

import (
	"context"
	"log/slog"
	"sort"
	"sync"

	"skiff.dev/skiff/api"
)

// An InformerFactory gives a process one Informer per kind (all
// namespaces, no selectors), shared by every component that reads that
// kind: client-go's SharedInformerFactory, as the sample-controller uses
// it. One cache and one watch stream per kind, however many controllers,
// schedulers and plugins read it.
//
// How a controller uses it (controlplane/controllers/controllers.go does
// this for every controller):
//
//	pods := f.InformerFor(&api.Pod{})          // the shared pod cache (a Lister)
//	pods.AddHandler(loop.Handler())           // its events feed your loop's queue
//	f.Start(ctx)                              // runs every informer asked for (a no-op when running)
//	pods.WaitForSync(ctx)                     // before your loop starts
//	obj, ok := pods.Get(ns, name)             // in Reconcile: shared, never modify (api.Clone)
//
// Informers asked for after Start run at once; handlers added after an
// informer started first see every cached object as an add
// (Informer.AddHandler), so components may start in any order. A
// component that stops before the process (a reloaded scheduler) removes
// its handlers with Informer.RemoveHandler.
type InformerFactory struct {
	c   Interface
	log *slog.Logger

	mu        sync.Mutex
	informers map[*api.Kind]*Informer
	ctx       context.Context // set by Start
	wg        sync.WaitGroup
}

// NewInformerFactory returns a factory of informers on c; log may be nil.
func NewInformerFactory(c Interface, log *slog.Logger) *InformerFactory {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &InformerFactory{c: c, log: log, informers: map[*api.Kind]*Informer{}}
}

// Client is the client the informers list and watch through.
func (f *InformerFactory) Client() Interface { return f.c }

// Informer returns the shared informer of kind k, making it on first use
// (and running it at once when the factory has started).
func (f *InformerFactory) Informer(k *api.Kind) *Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if inf, ok := f.informers[k]; ok {
		return inf
	}
	inf := NewInformer(f.c, k, "", api.ListOptions{}, f.log)
	f.informers[k] = inf
	if f.ctx != nil {
		f.run(inf)
	}
	return inf
}

// InformerFor is Informer of obj's kind (e.g. &api.Pod{}).
func (f *InformerFactory) InformerFor(obj api.Object) *Informer {
	return f.Informer(api.MustKindOf(obj))
}

// Start runs every informer made so far, and each one made later, until
// ctx ends. Only the first call counts (its ctx governs); later calls do
// nothing, so every component may call it.
func (f *InformerFactory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx != nil {
		return
	}
	f.ctx = ctx
	for _, inf := range f.informers {
		f.run(inf)
	}
}

// run starts inf under f.ctx; f.mu is held.
func (f *InformerFactory) run(inf *Informer) {
	f.wg.Go(func() { inf.Run(f.ctx) })
}

// WaitForCacheSync waits until every informer made so far has filled its
// cache (true) or ctx ends (false).
func (f *InformerFactory) WaitForCacheSync(ctx context.Context) bool {
	for _, inf := range f.Informers() {
		if !inf.WaitForSync(ctx) {
			return false
		}
	}
	return true
}

// Informers lists the informers made so far, by resource name.
func (f *InformerFactory) Informers() []*Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Informer, 0, len(f.informers))
	for _, inf := range f.informers {
		out = append(out, inf)
	}
	sort.Slice(out, func(a, b int) bool {
		ka, kb := out[a].Kind(), out[b].Kind()
		if ka.Group != kb.Group {
			return ka.Group < kb.Group
		}
		return ka.Resource < kb.Resource
	})
	return out
}

// Wait returns once every informer has stopped (after Start's ctx ended).
func (f *InformerFactory) Wait() { f.wg.Wait() }
