package containerd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"skiff.dev/skiff/runtime"
)

// EnsureImage implements runtime.Runtime.
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, progress func(runtime.PullProgress)) (runtime.ImageInfo, error) {
	ctx = r.ns(ctx)
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return runtime.ImageInfo{}, &runtime.PullError{Ref: ref, Err: err}
	}
	if policy != runtime.PullAlways {
		img, err := r.client.GetImage(ctx, name)
		switch {
		case err == nil:
			if err := r.unpack(ctx, img); err != nil {
				return runtime.ImageInfo{}, err
			}
			return r.imageInfo(ctx, img)
		case !errdefs.IsNotFound(err):
			return runtime.ImageInfo{}, fmt.Errorf("image %q: %w", name, mapErr(err))
		case policy == runtime.PullNever:
			return runtime.ImageInfo{}, fmt.Errorf("image %q (pull policy Never): %w", name, runtime.ErrImageNotFound)
		}
	}
	img, err := r.client.Pull(ctx, name,
		containerd.WithResolver(r.resolver(ctx)),
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(r.cfg.Snapshotter),
		containerd.WithImageHandlerWrapper(progressWrapper(name, progress)))
	if err != nil {
		return runtime.ImageInfo{}, &runtime.PullError{Ref: name, Err: mapErr(err), NotFound: errdefs.IsNotFound(err)}
	}
	info, err := r.imageInfo(ctx, img)
	if err == nil && progress != nil {
		progress(runtime.PullProgress{Ref: name, DoneBytes: info.Size, TotalBytes: info.Size, Done: true})
	}
	return info, err
}

// resolver resolves and fetches images as containerd's own pulls do with
// a registry config_path: each host's mirrors and CAs from
// RegistryHostsDir/HOST/hosts.toml (containerd's format), the host itself
// over HTTPS when it has none.
func (r *Runtime) resolver(ctx context.Context) remotes.Resolver {
	opts := config.HostOptions{}
	if r.cfg.RegistryHostsDir != "" {
		opts.HostDir = config.HostDirFromRoot(r.cfg.RegistryHostsDir)
	}
	return docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, opts)})
}

// progressWrapper reports bytes fetched after each blob: a manifest adds its
// children's sizes to the total, a fetched blob adds its size to done.
func progressWrapper(ref string, progress func(runtime.PullProgress)) func(images.Handler) images.Handler {
	var mu sync.Mutex
	var p = runtime.PullProgress{Ref: ref}
	return func(h images.Handler) images.Handler {
		return images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
			children, err := h.Handle(ctx, desc)
			if err != nil || progress == nil {
				return children, err
			}
			mu.Lock()
			defer mu.Unlock()
			p.DoneBytes += desc.Size
			if p.TotalBytes == 0 {
				p.TotalBytes = desc.Size
			}
			for _, c := range children {
				p.TotalBytes += c.Size
			}
			progress(p)
			return children, nil
		})
	}
}

func (r *Runtime) unpack(ctx context.Context, img containerd.Image) error {
	ok, err := img.IsUnpacked(ctx, r.cfg.Snapshotter)
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Name(), mapErr(err))
	}
	if !ok {
		if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
			return fmt.Errorf("unpack image %q: %w", img.Name(), mapErr(err))
		}
	}
	return nil
}

func (r *Runtime) imageInfo(ctx context.Context, img containerd.Image) (runtime.ImageInfo, error) {
	info := runtime.ImageInfo{Name: img.Name(), Digest: img.Target().Digest.String()}
	if size, err := img.Size(ctx); err == nil {
		info.Size = size
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return info, fmt.Errorf("image %q config: %w", img.Name(), mapErr(err))
	}
	info.Entrypoint = spec.Config.Entrypoint
	info.Cmd = spec.Config.Cmd
	info.Env = spec.Config.Env
	info.WorkingDir = spec.Config.WorkingDir
	info.User = spec.Config.User
	return info, nil
}

// ImportImage implements runtime.Runtime.
func (r *Runtime) ImportImage(ctx context.Context, rd io.Reader) ([]string, error) {
	ctx = r.ns(ctx)
	imgs, err := r.client.Import(ctx, rd,
		containerd.WithImageRefTranslator(fullRefOnly),
		containerd.WithImportCompression())
	if err != nil {
		return nil, fmt.Errorf("import image: %w", mapErr(err))
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import image: the archive names no image (io.containerd.image.name or a full org.opencontainers.image.ref.name)")
	}
	names := make([]string, 0, len(imgs))
	for _, i := range imgs {
		img := containerd.NewImage(r.client, i)
		if err := r.unpack(ctx, img); err != nil {
			return nil, fmt.Errorf("import image: %w", err)
		}
		names = append(names, i.Name)
	}
	return names, nil
}

// fullRefOnly names an OCI layout's image by its ref.name annotation when
// that is a full reference (busybox:1.36, ghcr.io/x/y:v1); a bare tag
// ("latest", as skopeo writes) names nothing.
func fullRefOnly(name string) string {
	if !strings.ContainsAny(name, ":/@") {
		return ""
	}
	norm, err := runtime.NormalizeImageRef(name)
	if err != nil {
		return ""
	}
	return norm
}

// ListImages implements runtime.Runtime.
func (r *Runtime) ListImages(ctx context.Context) ([]runtime.ImageInfo, error) {
	ctx = r.ns(ctx)
	imgs, err := r.client.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", mapErr(err))
	}
	out := make([]runtime.ImageInfo, 0, len(imgs))
	for _, img := range imgs {
		info, err := r.imageInfo(ctx, img)
		if err != nil {
			r.log.Debug("list images: skip", "image", img.Name(), "err", err)
			continue
		}
		out = append(out, info)
	}
	return out, nil
}
