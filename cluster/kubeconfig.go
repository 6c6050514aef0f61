package cluster

import (
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"skiff.dev/skiff/client"
)

// KubeconfigFile is the kubeconfig's name in the data dir (`skiff
// kubeconfig` prints it).
const KubeconfigFile = "kubeconfig"

// WriteKubeconfigs writes cc as a kubeconfig into the data dir and
// $HOME/.skiff/kubeconfig, and merges it into ~/.kube/config when merge;
// started with sudo, the same again in the sudo user's home, owned by
// them (their own skiff and kubectl run as themselves).
func WriteKubeconfigs(cc client.Config, dataDir string, merge bool, lg *slog.Logger) error {
	if err := client.WriteKubeconfig(filepath.Join(dataDir, KubeconfigFile), cc); err != nil {
		return err
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if err := writeHomeKubeconfigs(cc, home, merge, nil); err != nil {
			return err
		}
	}
	if name := os.Getenv("SUDO_USER"); name != "" && name != "root" {
		u, err := user.Lookup(name)
		if err == nil {
			err = writeHomeKubeconfigs(cc, u.HomeDir, merge, u)
		}
		if err != nil {
			lg.Warn("write the kubeconfig for the sudo user", "user", name, "err", err)
		}
	}
	return nil
}

// writeHomeKubeconfigs writes home/.skiff/kubeconfig and merges into
// home/.kube/config; owner, when set, is given the files and directories.
func writeHomeKubeconfigs(cc client.Config, home string, merge bool, owner *user.User) error {
	paths := []string{filepath.Join(home, ".skiff", KubeconfigFile)}
	if err := client.WriteKubeconfig(paths[0], cc); err != nil {
		return err
	}
	if merge {
		p := filepath.Join(home, ".kube", "config")
		if err := client.MergeKubeconfig(p, cc); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	if owner == nil {
		return nil
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	for _, p := range paths {
		_ = os.Chown(filepath.Dir(p), uid, gid)
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}
