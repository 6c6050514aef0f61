package apiserver

import (
	"runtime"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// KubernetesMajor and KubernetesMinor are the Kubernetes version /version
// claims. skiff is not a Kubernetes release: it serves a subset of the
// Kubernetes API, field for field, and the course is typed with kubectl
// 1.32 (the machine image's /usr/bin/kubectl). kubectl warns when the
// server is more than one minor version away from it, and client
// libraries pick behaviour by this pair, so skiff answers as the release
// whose kubectl it is tested with. skiff's own version follows in
// gitVersion's build metadata ("v1.32.0+skiff-v0.1.0"), as k3s writes
// "v1.32.3+k3s1".
const (
	KubernetesMajor = "1"
	KubernetesMinor = "32"
)

// versionInfo is GET /version: Kubernetes' version.Info.
func (s *Server) versionInfo() version.Info {
	info := version.Info{
		Major:      KubernetesMajor,
		Minor:      KubernetesMinor,
		GitVersion: "v" + KubernetesMajor + "." + KubernetesMinor + ".0+skiff-" + buildMetadata(s.cfg.Version),
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				info.GitCommit = st.Value
			case "vcs.time":
				info.BuildDate = st.Value
			case "vcs.modified":
				info.GitTreeState = "clean"
				if st.Value == "true" {
					info.GitTreeState = "dirty"
				}
			}
		}
	}
	return info
}

// buildMetadata makes v usable as semver build metadata: characters other
// than [0-9A-Za-z-.] become '-', so that kubectl's version parser (which
// compares major and minor for its skew warning) accepts gitVersion.
func buildMetadata(v string) string {
	if v == "" {
		v = "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.Trim(v, "."))
}
