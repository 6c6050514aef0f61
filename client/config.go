package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config tells a client where the API server is and how to authenticate.
// `skiff up` and `skiff server` write it to $HOME/.skiff/config (and into
// their data directory); the CLI reads it. It is YAML:
//
//	server: http://127.0.0.1:6443
//	token: 3f9c...
//
// A cluster of several servers (embedded etcd) lists the others too; the
// client talks to Server first and moves to the next one when a server
// cannot be reached:
//
//	server: http://10.0.0.1:7443
//	servers: [http://10.0.0.2:7443, http://10.0.0.3:7443]
type Config struct {
	// Server is the API server's base URL, e.g. "http://127.0.0.1:6443".
	// A bare "host:port" means http.
	Server string `json:"server"`
	// Servers are more API servers of the same cluster, tried in order
	// after Server when it cannot be reached. Optional.
	Servers []string `json:"servers,omitempty"`
	// Token is the bearer token the API server requires.
	Token string `json:"token,omitempty"`
}

// ConfigEnv is the environment variable that names a config file.
const ConfigEnv = "SKIFF_CONFIG"

// ResolveConfigPath picks the config file: the --config flag when set, then
// $SKIFF_CONFIG, then $HOME/.skiff/config.
func ResolveConfigPath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(ConfigEnv); env != "" {
		return env
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(".skiff", "config")
	}
	return filepath.Join(home, ".skiff", "config")
}

// LoadConfig reads a config file. A missing file gets an error that tells a
// new user what to do (and still satisfies errors.Is(err, fs.ErrNotExist)).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("no skiff config found at %s: start a cluster with `skiff up` or pass --config: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return Config{}, fmt.Errorf("read skiff config: %w", err)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("parse skiff config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("skiff config %s: %w", path, err)
	}
	return cfg, nil
}

// Validate reports what is wrong with a config.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Server) == "" {
		errs = append(errs, errors.New("server: required (the API server address, e.g. http://127.0.0.1:6443)"))
	}
	for i, s := range c.Servers {
		if strings.TrimSpace(s) == "" {
			errs = append(errs, fmt.Errorf("servers[%d]: empty", i))
		}
	}
	return errors.Join(errs...)
}

// SaveConfig writes a config file readable only by its owner (0600),
// creating its directory. The write is atomic: a reader never sees half a file.
func SaveConfig(path string, cfg Config) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode skiff config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save skiff config: %w", err)
	}
	f, err := os.CreateTemp(dir, ".config-*")
	if err != nil {
		return fmt.Errorf("save skiff config: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("save skiff config: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("save skiff config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save skiff config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save skiff config: %w", err)
	}
	return nil
}
