package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"skiff.dev/skiff/runtime"
	ctrd "skiff.dev/skiff/runtime/containerd"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// openRuntime picks the node's runtime (Config.Runtime). With auto,
// containerd is used when its socket answers; otherwise the simulated
// runtime, and note says how to get real containers.
func openRuntime(ctx context.Context, cfg Config, cdiDirs []string, lg *slog.Logger) (rt runtime.Runtime, simulated bool, note string, err error) {
	openCtrd := func() (runtime.Runtime, error) {
		cc := ctrd.DefaultConfig()
		cc.Address = cfg.ContainerdAddress
		if cfg.ContainerdNamespace != "" {
			cc.Namespace = cfg.ContainerdNamespace
		}
		cc.StateDir = filepath.Join(cfg.DataDir, "containers")
		cc.RegistryHostsDir = cfg.RegistryHostsDir
		cc.CDISpecDirs = append(append([]string(nil), cc.CDISpecDirs...), cdiDirs...)
		cc.Logger = lg
		return ctrd.New(ctx, cc)
	}
	switch cfg.Runtime {
	case RuntimeContainerd:
		rt, err := openCtrd()
		if err != nil {
			return nil, false, "", fmt.Errorf("containerd at %s: %w", cfg.ContainerdAddress, err)
		}
		return rt, false, "", nil
	case RuntimeFake:
		return rtfake.New(rtfake.DefaultConfig()), true, "", nil
	case RuntimeAuto:
		if _, statErr := os.Stat(cfg.ContainerdAddress); statErr == nil {
			rt, err := openCtrd()
			if err == nil {
				return rt, false, "", nil
			}
			return rtfake.New(rtfake.DefaultConfig()), true,
				fmt.Sprintf("containerd at %s did not answer (%v): pods are simulated. Run skiff as root, or start containerd, for real containers.", cfg.ContainerdAddress, err), nil
		}
		return rtfake.New(rtfake.DefaultConfig()), true,
			fmt.Sprintf("no containerd at %s: pods are simulated. For real containers: sudo ./hack/up.sh (it installs containerd, runc and the CNI plugins)", cfg.ContainerdAddress), nil
	}
	return nil, false, "", fmt.Errorf("runtime %q: want %s, %s or %s", cfg.Runtime, RuntimeAuto, RuntimeContainerd, RuntimeFake)
}
