package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Config of a node's provisioner.
type Config struct {
	// NodeName is the node it provisions for.
	NodeName string
	// Dir holds the volumes' directories (DATA-DIR/storage).
	Dir string
	// Log, or discard.
	Log *slog.Logger
}

// EventRecorder writes events (client.Recorder).
type EventRecorder interface {
	Eventf(ctx context.Context, obj api.Object, eventType, reason, format string, args ...any)
}

// Provisioner makes and deletes one node's local-path volumes. Build it
// with New, run it with Run.
type Provisioner struct {
	c       client.Interface
	cfg     Config
	log     *slog.Logger
	events  EventRecorder
	rec     *client.Recorder // nil when events were given (tests)
	claims  *client.Informer
	volumes *client.Informer
}

var (
	claimKind  = api.MustKindOf(&api.PersistentVolumeClaim{})
	volumeKind = api.MustKindOf(&api.PersistentVolume{})
)

// New returns the provisioner of cfg.NodeName over c. events may be nil:
// then it writes events itself, as "rancher.io/local-path_NODE".
func New(c client.Interface, cfg Config, events EventRecorder) *Provisioner {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "local-path-provisioner")
	p := &Provisioner{c: c, cfg: cfg, log: log, events: events}
	if events == nil {
		p.rec = client.NewRecorder(c, api.LocalPathProvisioner+"_"+cfg.NodeName, cfg.NodeName, log)
		p.events = p.rec
	}
	p.claims = client.NewInformer(c, claimKind, "", api.ListOptions{}, log)
	p.volumes = client.NewInformer(c, volumeKind, "", api.ListOptions{}, log)
	return p
}

// Run provisions and deletes until ctx ends.
func (p *Provisioner) Run(ctx context.Context) error {
	opts := client.DefaultLoopOptions("local-path-provisioner")
	opts.Log = p.log
	claimLoop := client.NewLoop(client.ReconcilerFunc(p.ReconcileClaim), opts)
	claimLoop.SetResyncFunc(p.claims.Keys)
	opts.Name = "local-path-deleter"
	volumeLoop := client.NewLoop(client.ReconcilerFunc(p.ReconcileVolume), opts)
	volumeLoop.SetResyncFunc(p.volumes.Keys)
	p.claims.AddHandler(claimLoop.Handler())
	p.volumes.AddHandler(volumeLoop.Handler())

	var wg sync.WaitGroup
	defer wg.Wait()
	if p.rec != nil {
		wg.Go(func() { _ = p.rec.Run(ctx) })
	}
	wg.Go(func() { p.claims.Run(ctx) })
	wg.Go(func() { p.volumes.Run(ctx) })
	if !p.claims.WaitForSync(ctx) || !p.volumes.WaitForSync(ctx) {
		return nil
	}
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = claimLoop.Run(ctx) })
	wg.Go(func() { errs[1] = volumeLoop.Run(ctx) })
	wg.Wait()
	return errors.Join(errs...)
}

// VolumeName is the name of the volume made for a claim: pvc-UID.
func VolumeName(c *api.PersistentVolumeClaim) string { return "pvc-" + c.UID }

// ReconcileClaim makes the volume of one claim, when it is this node's to make.
func (p *Provisioner) ReconcileClaim(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	o, ok := p.claims.Get(ns, name)
	if !ok {
		return nil
	}
	c := o.(*api.PersistentVolumeClaim)
	if c.Spec.VolumeName != "" || c.DeletionTimestamp != nil ||
		c.Annotations[api.AnnotationStorageProvisioner] != api.LocalPathProvisioner ||
		c.Annotations[api.AnnotationSelectedNode] != p.cfg.NodeName {
		return nil
	}
	if _, exists := p.volumes.Get("", VolumeName(c)); exists {
		return nil // made; the persistent volume controller binds it
	}
	sc, err := client.Get[*api.StorageClass](ctx, p.c, "", api.ClaimClass(c))
	if err != nil {
		return p.failed(ctx, c, fmt.Errorf("get storage class %q: %w", api.ClaimClass(c), err))
	}
	if sc.Provisioner != api.LocalPathProvisioner {
		return nil // a class changed under the claim: not ours
	}
	p.events.Eventf(ctx, c, api.EventNormal, "Provisioning", "External provisioner is provisioning volume for claim %q", key)
	pv, err := p.volumeFor(c, sc)
	if err != nil {
		return p.failed(ctx, c, err)
	}
	if err := os.MkdirAll(pv.Spec.HostPath.Path, 0o777); err != nil {
		return p.failed(ctx, c, fmt.Errorf("create volume directory: %w", err))
	}
	if err := os.Chmod(pv.Spec.HostPath.Path, 0o777); err != nil { // the umask took bits away
		return p.failed(ctx, c, fmt.Errorf("create volume directory: %w", err))
	}
	if _, err := p.c.Create(ctx, pv); err != nil && !api.IsAlreadyExists(err) {
		return p.failed(ctx, c, fmt.Errorf("create volume %s: %w", pv.Name, err))
	}
	p.events.Eventf(ctx, c, api.EventNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", pv.Name)
	p.log.Info("provisioned", "claim", key, "volume", pv.Name, "path", pv.Spec.HostPath.Path)
	return nil
}

func (p *Provisioner) failed(ctx context.Context, c *api.PersistentVolumeClaim, err error) error {
	p.events.Eventf(ctx, c, api.EventWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", api.ClaimClass(c), err)
	return err
}

// volumeFor is the volume the provisioner makes for claim c of class sc.
func (p *Provisioner) volumeFor(c *api.PersistentVolumeClaim, sc *api.StorageClass) (*api.PersistentVolume, error) {
	for _, m := range c.Spec.AccessModes {
		if m != api.ReadWriteOnce && m != api.ReadWriteOncePod {
			return nil, errors.New("NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")
		}
	}
	if p.cfg.Dir == "" || !filepath.IsAbs(p.cfg.Dir) {
		return nil, fmt.Errorf("node %s has no storage directory", p.cfg.NodeName)
	}
	name := VolumeName(c)
	policy := api.ReclaimDelete
	if sc.ReclaimPolicy != nil {
		policy = *sc.ReclaimPolicy
	}
	dirOrCreate := "DirectoryOrCreate"
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name,
		Annotations: map[string]string{api.AnnotationProvisionedBy: api.LocalPathProvisioner}}}
	pv.Spec = api.PersistentVolumeSpec{
		Capacity:                      maps.Clone(c.Spec.Resources.Requests),
		AccessModes:                   append([]string(nil), c.Spec.AccessModes...),
		PersistentVolumeReclaimPolicy: policy,
		StorageClassName:              sc.Name,
		HostPath:                      &api.HostPathVolumeSource{Path: filepath.Join(p.cfg.Dir, name+"_"+c.Namespace+"_"+c.Name), Type: &dirOrCreate},
		NodeAffinity:                  api.LocalPathNodeAffinity(p.cfg.NodeName),
		ClaimRef:                      &api.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion},
	}
	return pv, nil
}

// ReconcileVolume deletes one of this node's volumes once it is Released
// with reclaim policy Delete: the directory, then the volume.
func (p *Provisioner) ReconcileVolume(ctx context.Context, name string) error {
	o, ok := p.volumes.Get("", name)
	if !ok {
		return nil
	}
	pv := o.(*api.PersistentVolume)
	if !api.IsLocalPathVolumeOf(pv, p.cfg.NodeName) || pv.Status.Phase != api.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != api.ReclaimDelete || pv.DeletionTimestamp != nil || pv.Spec.HostPath == nil {
		return nil
	}
	dir := pv.Spec.HostPath.Path
	if filepath.Dir(filepath.Clean(dir)) != filepath.Clean(p.cfg.Dir) {
		err := fmt.Errorf("%s is not in this node's storage directory %s: not removed", dir, p.cfg.Dir)
		p.events.Eventf(ctx, pv, api.EventWarning, "VolumeFailedDelete", "%v", err)
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		p.events.Eventf(ctx, pv, api.EventWarning, "VolumeFailedDelete", "remove %s: %v", dir, err)
		return err
	}
	if err := p.c.Delete(ctx, volumeKind, "", name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &pv.UID}}); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	p.log.Info("deleted", "volume", name, "path", dir)
	return nil
}
