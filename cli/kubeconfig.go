package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
)

// Environment variables a token may come from instead of a file: a token
// never goes on a command line, where `ps` shows it to every user.
const (
	// adminTokenEnv holds the admin token (`skiff server --join-server`).
	adminTokenEnv = "SKIFF_TOKEN"
	// joinTokenEnv holds the join token (`skiff agent`).
	joinTokenEnv = "SKIFF_JOIN_TOKEN"
)

// kubeconfigFile is the kubeconfig's name in the data dir.
const kubeconfigFile = "kubeconfig"

// readTokenFlag returns the token in file (when given), else in $env,
// else "". An empty file is an error.
func readTokenFlag(file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token %s: file is empty", file)
	}
	return tok, nil
}

// writeKubeconfigs writes cc as a kubeconfig into the data dir and
// $HOME/.skiff/kubeconfig, and merges it into ~/.kube/config when merge;
// started with sudo, the same again in the sudo user's home, owned by
// them (their own skiff and kubectl run as themselves).
func writeKubeconfigs(cc client.Config, dataDir string, merge bool, lg *slog.Logger) error {
	if err := client.WriteKubeconfig(filepath.Join(dataDir, kubeconfigFile), cc); err != nil {
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
	paths := []string{filepath.Join(home, ".skiff", kubeconfigFile)}
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

// kubeconfigCmd prints the kubeconfig the server wrote into its data dir.
type kubeconfigCmd struct {
	r       *Root
	dataDir string
}

func newKubeconfigCmd(r *Root) *cobra.Command {
	k := &kubeconfigCmd{r: r}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the kubeconfig of the cluster this machine serves (server, CA, admin token), for kubectl or another machine",
		Long: `Print the kubeconfig ` + "`skiff up`" + ` and ` + "`skiff server`" + ` wrote into their data directory:
cluster "skiff" (the API server's https URL and the cluster CA), user "skiff-admin"
(the admin token) and context "skiff". It holds the admin token: keep it private.`,
		Example: `  skiff kubeconfig > ~/skiff.kubeconfig; kubectl --kubeconfig ~/skiff.kubeconfig get nodes`,
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return k.Run() },
	}
	home, _ := os.UserHomeDir()
	cmd.Flags().StringVar(&k.dataDir, "data-dir", filepath.Join(home, ".skiff", "data"), "the server's data directory")
	return cmd
}

// Run prints the file.
func (k *kubeconfigCmd) Run() error {
	p := filepath.Join(k.dataDir, kubeconfigFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no kubeconfig in %s: start the cluster with `skiff up` (or pass the server's --data-dir)", k.dataDir)
	}
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	_, err = k.r.Stdout.Write(b)
	return err
}
