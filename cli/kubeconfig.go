package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/cluster"
)

// readTokenFlag returns the token in file (when given), else in $env
// (cluster.AdminTokenEnv, cluster.JoinTokenEnv), else "": a token never
// goes on a command line, where `ps` shows it to every user. An empty
// file is an error.
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
	p := filepath.Join(k.dataDir, cluster.KubeconfigFile)
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
