package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
)

// exposeCmd is `skiff expose deployment NAME --port P`: a Service with the
// deployment's selector, as kubectl expose makes.
type exposeCmd struct {
	root       *Root
	args       []string
	port       int32
	targetPort string
	nodePort   int32
	typ        string
	name       string
	protocol   string
}

func newExposeCmd(r *Root) *cobra.Command {
	c := &exposeCmd{root: r}
	cmd := &cobra.Command{
		Use:   "expose (deployment NAME | deployment/NAME) --port PORT [--target-port PORT] [--type ClusterIP|NodePort]",
		Short: "Make a deployment's pods reachable through a new Service",
		Long: `Create a Service that selects the pods of a deployment (its spec.selector's
matchLabels), with one port: --port on the service's cluster IP, forwarded to
--target-port (a number or a container port name; default: --port) on the
pods. With --type NodePort the service is also reachable on every node's
--node-port (allocated from 30000-32767 unless given).`,
		Example: `  skiff expose deployment nginx-demo --port 80 --type NodePort --node-port 30080
  skiff expose deployment/web --port 8080 --target-port http --name web-internal`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.Int32Var(&c.port, "port", 0, "the service's port (required)")
	fl.StringVar(&c.targetPort, "target-port", "", "the pods' port, a number or a container port name (default: --port)")
	fl.Int32Var(&c.nodePort, "node-port", 0, "the node port for --type NodePort (default: allocated)")
	fl.StringVar(&c.typ, "type", "ClusterIP", "ClusterIP or NodePort")
	fl.StringVar(&c.name, "name", "", "the service's name (default: the deployment's)")
	fl.StringVar(&c.protocol, "protocol", "TCP", "TCP or UDP")
	return cmd
}

// Run creates the service.
func (c *exposeCmd) Run(ctx context.Context) error {
	var kind, name string
	switch {
	case len(c.args) == 1 && strings.Contains(c.args[0], "/"):
		kind, name, _ = strings.Cut(c.args[0], "/")
	case len(c.args) == 2:
		kind, name = c.args[0], c.args[1]
	default:
		return fmt.Errorf("expose: want deployment NAME or deployment/NAME")
	}
	switch strings.ToLower(kind) {
	case "deployment", "deployments", "deploy":
	default:
		return fmt.Errorf("expose: cannot expose a %q: only deployments", kind)
	}
	if c.port <= 0 || c.port > 65535 {
		return fmt.Errorf("expose: --port is required (1-65535)")
	}
	if c.typ != "ClusterIP" && c.typ != "NodePort" {
		return fmt.Errorf("expose: --type %q: want ClusterIP or NodePort", c.typ)
	}
	if c.nodePort != 0 && c.typ != "NodePort" {
		return fmt.Errorf("expose: --node-port needs --type NodePort")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	ns := c.root.Namespace
	o, err := cl.Get(ctx, api.MustKindOf(&api.Deployment{}), ns, name)
	if err != nil {
		return err
	}
	d := o.(*api.Deployment)
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		return fmt.Errorf("expose: deployment %s has no matchLabels selector to copy", name)
	}
	svc := &api.Service{}
	svc.Name = c.name
	if svc.Name == "" {
		svc.Name = name
	}
	svc.Namespace = ns
	svc.Labels = map[string]string{}
	for k, v := range d.Labels {
		svc.Labels[k] = v
	}
	svc.Spec.Type = c.typ
	svc.Spec.Selector = map[string]string{}
	for k, v := range d.Spec.Selector.MatchLabels {
		svc.Spec.Selector[k] = v
	}
	target := intstr.FromInt32(c.port)
	if c.targetPort != "" {
		target = intstr.Parse(c.targetPort)
	}
	svc.Spec.Ports = []api.ServicePort{{Port: c.port, TargetPort: target, NodePort: c.nodePort, Protocol: strings.ToUpper(c.protocol)}}
	if _, err := cl.Create(ctx, svc); err != nil {
		return err
	}
	fmt.Fprintf(c.root.Stdout, "service/%s exposed\n", svc.Name)
	return nil
}
