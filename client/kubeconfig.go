package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"skiff.dev/skiff/internal/atomicfile"
)

// # Kubeconfig
//
// The CLI finds its cluster in a kubeconfig, the file kubectl reads:
// the --kubeconfig flag, else $KUBECONFIG (a list of files, merged as
// kubectl merges them), else $HOME/.skiff/kubeconfig. It uses the
// current context's cluster (server, certificate-authority-data or
// certificate-authority) and user (token or token-file,
// client-certificate(-data) and client-key(-data)), loaded with
// client-go's clientcmd, so what kubectl accepts skiff accepts; as
// kubectl, it sends the user's credentials only to an https server.
//
// `skiff up` and `skiff server` write one (WriteKubeconfig) with cluster
// KubeconfigCluster, user KubeconfigUser and context KubeconfigContext,
// and merge the same three entries into ~/.kube/config
// (MergeKubeconfig), leaving every other context there alone, as kind
// does.
//
// A cluster of several API servers (embedded etcd) keeps the others in
// the cluster's extension ServersExtension: {"servers": [URL, ...]};
// kubectl ignores it and talks to `server`, skiff fails over along the
// list (Config.Servers).

// Names in the kubeconfig skiff writes.
const (
	KubeconfigCluster = "skiff"
	KubeconfigUser    = "skiff-admin"
	KubeconfigContext = "skiff"
	// ServersExtension is the cluster extension listing the other API
	// servers of the cluster.
	ServersExtension = "skiff.dev/servers"
)

// KubeconfigEnv is the environment variable kubectl reads too.
const KubeconfigEnv = clientcmd.RecommendedConfigPathEnvVar

// serversExtension is the value of ServersExtension.
type serversExtension struct {
	Servers []string `json:"servers"`
}

// DefaultKubeconfigPath is $HOME/.skiff/kubeconfig.
func DefaultKubeconfigPath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(".skiff", "kubeconfig")
	}
	return filepath.Join(home, ".skiff", "kubeconfig")
}

// loadingRules are the files to read: flag, else $KUBECONFIG, else
// DefaultKubeconfigPath.
func loadingRules(flag string) *clientcmd.ClientConfigLoadingRules {
	rules := &clientcmd.ClientConfigLoadingRules{}
	switch env := os.Getenv(KubeconfigEnv); {
	case flag != "":
		rules.ExplicitPath = flag
	case env != "":
		rules.Precedence = filepath.SplitList(env)
	default:
		rules.ExplicitPath = DefaultKubeconfigPath()
	}
	return rules
}

// LoadKubeconfig reads the kubeconfig the flag, $KUBECONFIG or the default
// path names (see the package's Kubeconfig section) and returns the
// client config of its current context. A missing file gets an error
// that tells a new user what to do (and satisfies errors.Is(err,
// fs.ErrNotExist)).
func LoadKubeconfig(flag string) (Config, error) {
	rules := loadingRules(flag)
	where := rules.ExplicitPath
	if where == "" {
		where = os.Getenv(KubeconfigEnv)
	}
	if rules.ExplicitPath != "" {
		if _, err := os.Stat(rules.ExplicitPath); errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("no kubeconfig found at %s: start a cluster with `skiff up` or pass --kubeconfig: %w", rules.ExplicitPath, fs.ErrNotExist)
		}
	}
	raw, err := rules.Load()
	if err != nil {
		return Config{}, fmt.Errorf("read kubeconfig %s: %w", where, err)
	}
	cfg, err := configFromKubeconfig(raw)
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", where, err)
	}
	return cfg, nil
}

// configFromKubeconfig resolves the current context of kc.
func configFromKubeconfig(kc *clientcmdapi.Config) (Config, error) {
	cc := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return Config{}, fmt.Errorf("no current context: start a cluster with `skiff up`, or choose one with kubectl config use-context: %w", fs.ErrNotExist)
		}
		return Config{}, err
	}
	if err := rest.LoadTLSFiles(rc); err != nil {
		return Config{}, err
	}
	if rc.Insecure {
		return Config{}, errors.New("insecure-skip-tls-verify: not supported by skiff (use the certificate-authority-data `skiff up` wrote)")
	}
	// A token file is read and trimmed, as kubectl's file token source
	// does: clientcmd puts the file's bytes, newline included, in
	// BearerToken, and a header value may not end in one. An inline token
	// wins over a file, as in kubectl.
	tok := rc.BearerToken
	if rc.BearerTokenFile != "" && !inlineToken(kc) {
		b, err := os.ReadFile(rc.BearerTokenFile)
		if err != nil {
			return Config{}, fmt.Errorf("token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	cfg := Config{Server: rc.Host, Token: tok, CAData: rc.CAData, CertData: rc.CertData, KeyData: rc.KeyData}
	if ctx := kc.Contexts[kc.CurrentContext]; ctx != nil {
		cfg.Namespace = ctx.Namespace
		if cl := kc.Clusters[ctx.Cluster]; cl != nil {
			if ext, ok := cl.Extensions[ServersExtension]; ok {
				var se serversExtension
				raw, ok := ext.(*runtime.Unknown)
				if !ok || json.Unmarshal(raw.Raw, &se) != nil {
					return Config{}, fmt.Errorf("cluster %s: extension %s: want {\"servers\": [URL, ...]}", ctx.Cluster, ServersExtension)
				}
				for _, s := range se.Servers {
					if s != cfg.Server {
						cfg.Servers = append(cfg.Servers, s)
					}
				}
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// inlineToken says whether the current context's user names a token
// itself (not only a token file).
func inlineToken(kc *clientcmdapi.Config) bool {
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil {
		return false
	}
	ai := kc.AuthInfos[ctx.AuthInfo]
	return ai != nil && ai.Token != ""
}

// setKubeconfig puts cfg's three entries into kc and makes its context
// current.
func setKubeconfig(kc *clientcmdapi.Config, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cl := clientcmdapi.NewCluster()
	cl.Server = cfg.Server
	cl.CertificateAuthorityData = cfg.CAData
	if len(cfg.Servers) > 0 {
		raw, err := json.Marshal(serversExtension{Servers: append([]string{cfg.Server}, cfg.Servers...)})
		if err != nil {
			return err
		}
		cl.Extensions[ServersExtension] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
	user := clientcmdapi.NewAuthInfo()
	user.Token = cfg.Token
	user.ClientCertificateData, user.ClientKeyData = cfg.CertData, cfg.KeyData
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = KubeconfigCluster, KubeconfigUser
	kc.Clusters[KubeconfigCluster] = cl
	kc.AuthInfos[KubeconfigUser] = user
	kc.Contexts[KubeconfigContext] = ctx
	kc.CurrentContext = KubeconfigContext
	return nil
}

// WriteKubeconfig writes cfg's kubeconfig (cluster KubeconfigCluster, user
// KubeconfigUser, context KubeconfigContext, the current one) to path
// (replacing the file), readable by its owner only (0600), atomically: a
// reader never sees half a file. It creates the directory (0700).
func WriteKubeconfig(path string, cfg Config) error {
	kc := clientcmdapi.NewConfig()
	if err := setKubeconfig(kc, cfg); err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	return writePrivate(path, b)
}

// MergeKubeconfig puts cfg's cluster, user and context into the
// kubeconfig at path (kubectl's ~/.kube/config), replacing only
// skiff's own three entries, and makes skiff's context the current one,
// as kind does. Every other cluster, user, context and preference stays.
// A missing file is created. The write is atomic and 0600.
func MergeKubeconfig(path string, cfg Config) error {
	kc, err := clientcmd.LoadFromFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kc = clientcmdapi.NewConfig()
	case err != nil:
		return fmt.Errorf("merge into kubeconfig %s: %w", path, err)
	}
	if err := setKubeconfig(kc, cfg); err != nil {
		return fmt.Errorf("merge into kubeconfig %s: %w", path, err)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("merge into kubeconfig %s: %w", path, err)
	}
	return writePrivate(path, b)
}

func writePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// UserKubeconfig is a kubeconfig for one user (`skiff kubeconfig --user`):
// cluster KubeconfigCluster as cfg names it (server, CA, the other
// servers), user NAME with cfg's client certificate and key, and context
// NAME@KubeconfigCluster, the current one, whose namespace is
// cfg.Namespace.
func UserKubeconfig(cfg Config, user string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	if err := setKubeconfig(kc, cfg); err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	ai := kc.AuthInfos[KubeconfigUser]
	delete(kc.AuthInfos, KubeconfigUser)
	delete(kc.Contexts, KubeconfigContext)
	kc.AuthInfos[user] = ai
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo, ctx.Namespace = KubeconfigCluster, user, cfg.Namespace
	name := user + "@" + KubeconfigCluster
	kc.Contexts[name] = ctx
	kc.CurrentContext = name
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return b, nil
}
