package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	kportforward "k8s.io/client-go/tools/portforward"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// portForwardCmd is `skiff port-forward`: listen on local ports and carry
// every connection to a port of a pod, through the API server and the
// agent of the pod's node (client-go's tools/portforward; agent/portforward).
type portForwardCmd struct {
	r         *Root
	addresses []string
}

func newPortForwardCmd(r *Root) *cobra.Command {
	p := &portForwardCmd{r: r}
	cmd := &cobra.Command{
		Use:   "port-forward (POD | TYPE/NAME) [LOCAL_PORT:]REMOTE_PORT [...[LOCAL_PORT_N:]REMOTE_PORT_N]",
		Short: "Forward one or more local ports to a pod",
		Long: `Listen on local ports and forward every connection to a port of a pod, through
the API server and the agent of the pod's node, until interrupted. TYPE/NAME
(deployment/web) picks the first pod of its selector, preferring running and
ready ones. LOCAL_PORT defaults to REMOTE_PORT; :REMOTE_PORT or 0:REMOTE_PORT
picks a free local port. REMOTE_PORT may name a container port.`,
		Example: `  skiff port-forward pod/web-7c5ddbdf54-x2x8k 8080:80
  skiff port-forward deployment/web 8080:80 8443:443
  skiff port-forward --address 0.0.0.0 web-7c5ddbdf54-x2x8k :http`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return p.Run(cmd.Context(), args[0], args[1:])
		},
	}
	cmd.Flags().StringSliceVar(&p.addresses, "address", []string{"127.0.0.1"},
		"addresses to listen on (comma-separated); localhost means 127.0.0.1 and ::1")
	return cmd
}

// portPair is one LOCAL:REMOTE argument.
type portPair struct {
	local  int
	remote string // a number or a container port name
}

// parsePortPairs reads [LOCAL:]REMOTE arguments.
func parsePortPairs(specs []string) ([]portPair, error) {
	var out []portPair
	for _, s := range specs {
		local, remote, hasLocal := strings.Cut(s, ":")
		if !hasLocal {
			local, remote = "", s
		}
		if remote == "" {
			return nil, fmt.Errorf("invalid port specification %q: the remote port is missing", s)
		}
		pp := portPair{remote: remote}
		if n, err := strconv.Atoi(remote); err == nil {
			if n < 1 || n > 65535 {
				return nil, fmt.Errorf("invalid port specification %q: remote port %d is not in 1-65535", s, n)
			}
		} else if strings.ContainsAny(remote, " /") {
			return nil, fmt.Errorf("invalid port specification %q: remote port %q is neither a number nor a port name", s, remote)
		}
		switch {
		case local == "" && hasLocal:
			pp.local = 0
		case local == "":
			n, err := strconv.Atoi(remote)
			if err != nil {
				return nil, fmt.Errorf("invalid port specification %q: a named remote port needs a local port (LOCAL:%s)", s, remote)
			}
			pp.local = n
		default:
			n, err := strconv.Atoi(local)
			if err != nil || n < 0 || n > 65535 {
				return nil, fmt.Errorf("invalid port specification %q: local port %q is not in 0-65535", s, local)
			}
			pp.local = n
		}
		out = append(out, pp)
	}
	return out, nil
}

// remotePort resolves a port number or a container port name of pod.
func remotePort(pod *api.Pod, remote string) (int, error) {
	if n, err := strconv.Atoi(remote); err == nil {
		return n, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == remote {
				return int(p.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("pod %s does not have a named port %q", pod.Name, remote)
}

// Run forwards until ctx ends or the connection to the pod is lost. It
// uses client-go's port forwarder, as kubectl does: one upgraded connection
// (SPDY over WebSocket, plain SPDY when that is refused) for every port and
// local connection (agent/portforward).
func (p *portForwardCmd) Run(ctx context.Context, target string, specs []string) error {
	pairs, err := parsePortPairs(specs)
	if err != nil {
		return err
	}
	c, err := p.r.Client()
	if err != nil {
		return err
	}
	pod, err := resolvePod(ctx, c, p.r.Namespace, target)
	if err != nil {
		return err
	}
	if pod.Status.Phase != api.PodRunning {
		return fmt.Errorf("unable to forward port because pod is not running. Current status=%s", pod.Status.Phase)
	}
	var ports []string
	for _, pp := range pairs {
		remote, err := remotePort(pod, pp.remote)
		if err != nil {
			return err
		}
		ports = append(ports, fmt.Sprintf("%d:%d", pp.local, remote))
	}
	cfg, err := p.r.ClientConfig()
	if err != nil {
		return err
	}
	rc := kubectl.RESTConfig(cfg)
	u, err := kubectl.URL(rc, client.PathFor(api.MustKindOf(&api.Pod{}), pod.Namespace, pod.Name, "portforward"), nil)
	if err != nil {
		return err
	}
	dialer, err := kubectl.NewPortForwardDialer(rc, u)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	defer context.AfterFunc(ctx, func() { close(stop) })()
	pf, err := kportforward.NewOnAddressesForStreaming(dialer, p.addresses, ports, stop, nil, p.r.Stdout, p.r.Stderr)
	if err != nil {
		return err
	}
	if err := pf.ForwardPorts(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
