package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/dashboard"
)

// dashboardCmd is `skiff dashboard [pod/NAME | node/NAME | hpa/NAME | loops] [-n NS]
// [--no-browser]`: a one-time login URL for the web dashboard, opened in
// the desktop's browser when there is one.
type dashboardCmd struct {
	root      *Root
	args      []string
	noBrowser bool
	// open starts a browser on url (xdg-open; tests replace it).
	open func(url string) error
}

func newDashboardCmd(r *Root) *cobra.Command {
	c := &dashboardCmd{root: r, open: xdgOpen}
	cmd := &cobra.Command{
		Use:   "dashboard [pod/NAME | node/NAME | hpa/NAME | loops]",
		Short: "Open the web dashboard (the chain of a pod, the gRPC sequence of a node, an autoscaler's plot, the control loops)",
		Long: `Print a one-time login URL for the web dashboard the API server serves under
/dashboard/, and open it in the desktop's browser when there is one
($DISPLAY or $WAYLAND_DISPLAY, and xdg-open). The URL works once and for
two minutes; the browser then holds a session cookie. With pod/NAME it
lands on that pod's chain view, with node/NAME on that node's device
plugin gRPC sequence, with hpa/NAME on that autoscaler's plot (each pod's
metric and the replica count over time, every decision marked), with
loops on the control-loop view.`,
		Example: `  skiff dashboard                      # the live cluster view
  skiff dashboard pod/gpu-test -n gpu-demo
  skiff dashboard node/lab-1 --no-browser
  skiff dashboard hpa/php-apache`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.args = args
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&c.noBrowser, "no-browser", false, "only print the URL")
	return cmd
}

// view is the dashboard view the arguments name.
func (c *dashboardCmd) view() (string, error) {
	if len(c.args) == 0 {
		return "", nil
	}
	if len(c.args) == 1 && (c.args[0] == "loops" || c.args[0] == "cluster") {
		return c.args[0], nil
	}
	refs, err := parseResourceArgs("dashboard", c.args)
	if err != nil {
		return "", err
	}
	if len(refs) == 1 && len(refs[0].Names) == 1 {
		switch refs[0].Kind.Kind {
		case "Pod":
			return "chain/" + c.root.Namespace + "/" + refs[0].Names[0], nil
		case "Node":
			return "sequence/" + refs[0].Names[0], nil
		case "HorizontalPodAutoscaler":
			return "hpa/" + c.root.Namespace + "/" + refs[0].Names[0], nil
		}
	}
	return "", errors.New("dashboard takes pod/NAME, node/NAME, hpa/NAME, loops or nothing")
}

// Run asks for a login code, prints the URL and maybe opens it.
func (c *dashboardCmd) Run(ctx context.Context) error {
	view, err := c.view()
	if err != nil {
		return err
	}
	ci, err := c.root.Client()
	if err != nil {
		return err
	}
	cl, ok := ci.(*client.Client)
	if !ok {
		return errors.New("dashboard: needs a connection to an API server")
	}
	body, err := json.Marshal(dashboard.LoginCodeRequest{View: view})
	if err != nil {
		return err
	}
	resp, err := cl.Do(ctx, "POST", dashboard.LoginCodePath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("ask for a dashboard login: %w", err)
	}
	defer resp.Body.Close()
	var lc dashboard.LoginCodeResponse
	if err := decodeJSON(resp.Body, &lc); err != nil {
		return fmt.Errorf("ask for a dashboard login: decode: %w", err)
	}
	url := cl.Server() + lc.URL
	fmt.Fprintf(c.root.Stdout, "%s\n", url)
	fmt.Fprintf(c.root.Stderr, "This URL logs in once, until %s; the browser then keeps a session.\n", lc.Expires.Local().Format("15:04:05"))
	if c.noBrowser || !hasDesktop() {
		return nil
	}
	if err := c.open(url); err != nil {
		fmt.Fprintf(c.root.Stderr, "Could not open a browser (%v): open the URL above.\n", err)
	}
	return nil
}

// hasDesktop: a graphical session and xdg-open.
func hasDesktop() bool {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return false
	}
	_, err := exec.LookPath("xdg-open")
	return err == nil
}

func xdgOpen(url string) error {
	cmd := exec.Command("xdg-open", url)
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}
