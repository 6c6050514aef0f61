package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
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

// kubeconfigCmd prints the kubeconfig the server wrote into its data dir,
// or (--user) a new user's.
type kubeconfigCmd struct {
	r          *Root
	dataDir    string
	user       string
	groups     []string
	expiration time.Duration
}

func newKubeconfigCmd(r *Root) *cobra.Command {
	k := &kubeconfigCmd{r: r}
	cmd := &cobra.Command{
		Use:   "kubeconfig [--user NAME [--group G]... [--namespace NS] [--expiration D]]",
		Short: "Print the kubeconfig of the cluster this machine serves (server, CA, admin token), or a new user's",
		Long: `Print the kubeconfig ` + "`skiff up`" + ` and ` + "`skiff server`" + ` wrote into their data directory:
cluster "skiff" (the API server's https URL and the cluster CA), user "skiff-admin"
(the admin token) and context "skiff". It holds the admin token: keep it private.

With --user, print a kubeconfig for that user instead: a new key made here and a
client certificate (CN the user, O each --group) issued by the cluster CA through
the CertificateSigningRequest API (signer kubernetes.io/kube-apiserver-client; the
request is approved with your credential, which needs RBAC's approve on that
signer), and --namespace as the context's default namespace. The user may do what
RBAC grants them (bind a role to them: kubectl create rolebinding ... --user NAME).`,
		Example: `  skiff kubeconfig > ~/skiff.kubeconfig; kubectl --kubeconfig ~/skiff.kubeconfig get nodes
  skiff kubeconfig --user alice --group students --namespace alice --expiration 720h > alice.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if k.user != "" {
				return k.RunUser(cmd.Context())
			}
			for _, f := range []string{"group", "expiration"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s needs --user", f)
				}
			}
			return k.Run()
		},
	}
	home, _ := os.UserHomeDir()
	fl := cmd.Flags()
	fl.StringVar(&k.dataDir, "data-dir", filepath.Join(home, ".skiff", "data"), "the server's data directory")
	fl.StringVar(&k.user, "user", "", "print a kubeconfig for this user (a client certificate, CN=NAME)")
	fl.StringArrayVar(&k.groups, "group", nil, "with --user: a group of the user (the certificate's O), repeatable")
	fl.DurationVar(&k.expiration, "expiration", 0, "with --user: how long the certificate is valid (at least 10m; default and at most a year)")
	// -n/--namespace is the root's: with --user it is the context's namespace.
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

// RunUser gets the user a certificate (client.RequestUserCertificate) and
// prints their kubeconfig.
func (k *kubeconfigCmd) RunUser(ctx context.Context) error {
	cfg, err := k.r.ClientConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	cert, key, _, err := client.RequestUserCertificate(ctx, c, client.UserCertificateRequest{User: k.user, Groups: k.groups, Expiration: k.expiration})
	if err != nil {
		return err
	}
	ns := ""
	if k.r.namespaceFlagSet() {
		ns = k.r.Namespace
	}
	out := client.Config{Server: cfg.Server, Servers: cfg.Servers, CAData: cfg.CAData, CertData: cert, KeyData: key, Namespace: ns}
	b, err := client.UserKubeconfig(out, k.user)
	if err != nil {
		return err
	}
	_, err = k.r.Stdout.Write(b)
	return err
}
