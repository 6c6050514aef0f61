package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver/authz"
)

// The RBAC objects the authorizer reads: kept in memory by four informers
// over the registry (each server its own: with etcd, RBAC writes through
// another server arrive by watch), indexed by authz.NewIndex. A change
// only marks the index stale; the next authorization rebuilds it once,
// so a burst of changes (the defaults at start, a classroom of bindings)
// costs one rebuild, not one per object.

var (
	roleKind               = api.MustKindOf(&api.Role{})
	clusterRoleKind        = api.MustKindOf(&api.ClusterRole{})
	roleBindingKind        = api.MustKindOf(&api.RoleBinding{})
	clusterRoleBindingKind = api.MustKindOf(&api.ClusterRoleBinding{})
)

// rbacCache keeps the RBAC index of one server.
type rbacCache struct {
	reg *Registry
	log *slog.Logger
	// ctx is the server's life (watchCtx): the informers end with it.
	ctx context.Context

	start   sync.Once
	started atomic.Bool // the informers run (watches)
	synced  chan struct{}
	infs    [4]*client.Informer // roles, clusterroles, rolebindings, clusterrolebindings

	stale atomic.Bool
	mu    sync.Mutex // one rebuild at a time
	cur   authz.RBAC
}

func newRBACCache(ctx context.Context, reg *Registry, log *slog.Logger) *rbacCache {
	return &rbacCache{reg: reg, log: log, ctx: ctx, synced: make(chan struct{})}
}

// run starts the informers (once) and closes synced when all four have
// filled their caches.
func (c *rbacCache) run() {
	c.start.Do(func() {
		local := NewLocal(c.reg)
		mark := func(api.Object) { c.stale.Store(true) }
		h := client.Handler{OnAdd: mark, OnUpdate: func(_, o api.Object) { mark(o) }, OnDelete: mark}
		for i, k := range []*api.Kind{roleKind, clusterRoleKind, roleBindingKind, clusterRoleBindingKind} {
			inf := client.NewInformer(local, k, "", api.ListOptions{}, c.log)
			inf.AddHandler(h)
			c.infs[i] = inf
			go inf.Run(c.ctx)
		}
		c.started.Store(true)
		go func() {
			for _, inf := range c.infs {
				if !inf.WaitForSync(c.ctx) {
					return
				}
			}
			c.stale.Store(true)
			close(c.synced)
		}()
	})
}

// watches is how many store watches the cache's informers hold.
func (c *rbacCache) watches() int {
	if c.started.Load() {
		return len(c.infs)
	}
	return 0
}

// index returns the current RBAC index, rebuilt first when an RBAC
// object changed. The first call starts the informers and waits, at most
// as long as ctx, until they have filled their caches.
func (c *rbacCache) index(ctx context.Context) (*authz.Index, error) {
	c.run()
	select {
	case <-c.synced:
	default:
		select {
		case <-c.synced:
		case <-ctx.Done():
			return nil, fmt.Errorf("authorize: the RBAC cache is not filled yet: %w", ctx.Err())
		case <-c.ctx.Done():
			return nil, fmt.Errorf("authorize: the server is shutting down")
		}
	}
	if c.stale.Load() {
		c.rebuild()
	}
	return c.cur.Index(), nil
}

// rebuild indexes what the informers hold now.
func (c *rbacCache) rebuild() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stale.Swap(false) {
		return // another request rebuilt meanwhile
	}
	c.cur.Update(authz.NewIndex(listAs[*api.Role](c.infs[0]), listAs[*api.ClusterRole](c.infs[1]),
		listAs[*api.RoleBinding](c.infs[2]), listAs[*api.ClusterRoleBinding](c.infs[3])))
}

// listAs is an informer's objects as their type (shared: read only).
func listAs[T api.Object](inf *client.Informer) []T {
	objs := inf.List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
