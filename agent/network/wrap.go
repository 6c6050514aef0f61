package network

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// wrapExec runs CNI plugins behind a command prefix (Config.Wrap); with no
// prefix it is libcni's own executor.
type wrapExec struct {
	wrap []string
	dec  version.PluginDecoder
}

func newWrapExec(wrap []string) invoke.Exec {
	if len(wrap) == 0 {
		return nil // libcni's default RawExec
	}
	return &wrapExec{wrap: wrap}
}

func (e *wrapExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	args := append(append([]string(nil), e.wrap[1:]...), pluginPath)
	cmd := exec.CommandContext(ctx, e.wrap[0], args...)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdinData)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// A plugin reports failure as a JSON error on stdout.
		var perr types.Error
		if json.Unmarshal(stdout.Bytes(), &perr) == nil && perr.Msg != "" {
			return nil, &perr
		}
		return nil, fmt.Errorf("%s %s: %w: %s", strings.Join(e.wrap, " "), pluginPath, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (e *wrapExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (e *wrapExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return e.dec.Decode(jsonBytes)
}

// run runs a node-network command (ip, iptables) behind the wrap prefix.
func run(ctx context.Context, wrap []string, stdin []byte, name string, args ...string) ([]byte, error) {
	return Run(ctx, wrap, stdin, name, args...)
}

// Run runs a node-network command (ip, iptables, iptables-restore) behind
// the wrap prefix (a test's `ip netns exec NS`), with stdin when not nil,
// and returns its stdout; a failure's error holds the command and stderr.
// The service proxy uses it too.
func Run(ctx context.Context, wrap []string, stdin []byte, name string, args ...string) ([]byte, error) {
	full := append(append(append([]string(nil), wrap...), name), args...)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
