package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	psapi "k8s.io/pod-security-admission/api"
)

// podSecurityFlag is --pod-security-default of `up` and `server`: the Pod
// Security level of every namespace without pod-security.kubernetes.io
// labels (controlplane/apiserver/admission_podsecurity.go), which
// cluster.Config.PodSecurityDefault carries to the API server.
type podSecurityFlag struct {
	level string
}

func (p *podSecurityFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.level, "pod-security-default", string(psapi.LevelBaseline),
		"Pod Security level (enforce, warn and audit) of namespaces without pod-security.kubernetes.io labels: "+
			"baseline (refuses hostPath, hostNetwork and hostPort pods), restricted, or privileged (checks nothing); "+
			"one namespace is lifted with the label pod-security.kubernetes.io/enforce=privileged")
}

// validate: "" (flags not registered) is the default.
func (p *podSecurityFlag) validate() error {
	if p.level == "" {
		return nil
	}
	if _, err := psapi.ParseLevel(p.level); err != nil {
		return fmt.Errorf("--pod-security-default %q: %w", p.level, err)
	}
	return nil
}
