package client_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"skiff.dev/skiff/client"
)

func TestResolveConfigPath(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name, flag, env, want string
	}{
		{name: "flag wins", flag: "/a/flag", env: "/b/env", want: "/a/flag"},
		{name: "env next", env: "/b/env", want: "/b/env"},
		{name: "home last", want: filepath.Join(home, ".skiff", "config")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv(client.ConfigEnv, tt.env)
			if got := client.ResolveConfigPath(tt.flag); got != tt.want {
				t.Errorf("ResolveConfigPath(%q) = %q, want %q", tt.flag, got, tt.want)
			}
		})
	}
}

func TestSaveLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "config")
	want := client.Config{Server: "http://127.0.0.1:6443", Servers: []string{"http://127.0.0.2:6443"}, Token: "s3cret"}
	if err := client.SaveConfig(path, want); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	got, err := client.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadConfig = %+v, want %+v", got, want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{name: "missing", path: filepath.Join(dir, "nope"), want: "no skiff config found at " + filepath.Join(dir, "nope") + ": start a cluster with `skiff up` or pass --config"},
		{name: "no server", path: write("noserver", "token: x\n"), want: "server: required"},
		{name: "unknown field", path: write("unknown", "server: http://x\nsevrer: y\n"), want: "sevrer"},
		{name: "not yaml", path: write("bad", "server: [\n"), want: "parse skiff config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.LoadConfig(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfig error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := client.LoadConfig(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing config: errors.Is(err, fs.ErrNotExist) = false for %v", err)
	}
}
