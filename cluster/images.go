package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	ctrd "skiff.dev/skiff/runtime/containerd"
)

// Containerd names the containerd a node on this machine runs pods on:
// its socket and the namespace of skiff's images and containers. `skiff
// image` imports images there, for lab rooms without a registry.
type Containerd struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
}

// DefaultContainerd is the containerd a node uses unless told otherwise
// (/run/containerd/containerd.sock, namespace skiff).
func DefaultContainerd() Containerd {
	cc := ctrd.DefaultConfig()
	return Containerd{Address: cc.Address, Namespace: cc.Namespace}
}

func containerdRecordPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".skiff", "containerd.json"), nil
}

// RecordContainerd records, in ~/.skiff/containerd.json, the containerd
// the local node runs on, for `skiff image`. `up`, `server` and `agent`
// record it once their node runs on real containers.
func RecordContainerd(c Containerd) error {
	p, err := containerdRecordPath()
	if err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o600)
}

// RecordedContainerd is what RecordContainerd recorded last; an error
// satisfying errors.Is(err, fs.ErrNotExist) when nothing was.
func RecordedContainerd() (Containerd, error) {
	var c Containerd
	p, err := containerdRecordPath()
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// OpenImages connects to the containerd c, to import and list images.
// The caller closes it.
func OpenImages(ctx context.Context, c Containerd) (*ctrd.Runtime, error) {
	cfg := ctrd.DefaultConfig()
	cfg.Address, cfg.Namespace = c.Address, c.Namespace
	rt, err := ctrd.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w (images need containerd; run as root)", cfg.Address, err)
	}
	return rt, nil
}
