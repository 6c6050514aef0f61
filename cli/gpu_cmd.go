package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api/gputopology"
)

// `skiff gpu fault NODE GPU --xid 79` breaks a simulated GPU the way a real
// one breaks (an Xid error), and `--clear` repairs it. The request goes to
// the API server's nodes/proxy subresource, which forwards it to the node's
// agent (POST /gpus/GPU/fault). The node's allocatable nvidia.com/gpu drops
// by one within a second and the device manager stops handing the GPU out;
// pods already using it keep running, as on a real node.

func newGPUCmd(r *Root) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpu",
		Short: "Work with the GPUs of a node (fault injection on simulated GPUs)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newGPUFaultCmd(r))
	return cmd
}

// gpuFaultCmd is `skiff gpu fault NODE GPU (--xid N | --clear)`.
type gpuFaultCmd struct {
	r     *Root
	xid   uint64
	clear bool
}

func newGPUFaultCmd(r *Root) *cobra.Command {
	g := &gpuFaultCmd{r: r}
	cmd := &cobra.Command{
		Use:   "fault NODE GPU (--xid N | --clear)",
		Short: "Inject an Xid error into a simulated GPU, or clear it",
		Long: `Inject an Xid error into GPU number GPU (its nvidia-smi index) of NODE, whose
GPUs must be simulated (--gpus sim:...). A critical Xid (79: the GPU fell off
the bus; 48: double-bit ECC error; ...) makes the GPU unhealthy: the node's
allocatable nvidia.com/gpu drops by one and no new pod gets it. Application
Xids (13, 31, 43, 45, 68, 109) are recorded but leave the GPU healthy, as
NVIDIA's device plugin treats them. --clear makes the GPU healthy again.`,
		Example: `  skiff gpu fault node-1 3 --xid 79
  skiff gpu fault node-1 3 --clear`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: r.completeNames("nodes"),
		RunE:              func(cmd *cobra.Command, args []string) error { return g.Run(cmd.Context(), args[0], args[1]) },
	}
	cmd.Flags().Uint64Var(&g.xid, "xid", 0, "the Xid error to inject (79: GPU has fallen off the bus)")
	cmd.Flags().BoolVar(&g.clear, "clear", false, "make the GPU healthy again")
	return cmd
}

// rawDoer is the part of *client.Client that proxied requests need.
type rawDoer interface {
	Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error)
}

// Run sends the fault to the node's agent and prints the GPU's new state.
func (g *gpuFaultCmd) Run(ctx context.Context, node, index string) error {
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 {
		return fmt.Errorf("GPU %q: want the GPU's index (0, 1, ...) as nvidia-smi numbers it", index)
	}
	q := url.Values{}
	switch {
	case g.clear && g.xid != 0:
		return errors.New("give either --xid or --clear, not both")
	case g.clear:
		q.Set("clear", "true")
	case g.xid != 0:
		q.Set("xid", strconv.FormatUint(g.xid, 10))
	default:
		return errors.New("give --xid N to inject an Xid error (79: GPU has fallen off the bus), or --clear")
	}
	c, err := g.r.Client()
	if err != nil {
		return err
	}
	d, ok := c.(rawDoer)
	if !ok {
		return errors.New("gpu fault needs an HTTP connection to the API server")
	}
	path := "/api/v1/nodes/" + url.PathEscape(node) + "/proxy/gpus/" + strconv.Itoa(i) + "/fault?" + q.Encode()
	resp, err := d.Do(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res gputopology.FaultResult
	if err := decodeJSON(resp.Body, &res); err != nil {
		return fmt.Errorf("gpu fault: read the agent's answer: %w", err)
	}
	health := "healthy"
	if !res.Healthy {
		health = "unhealthy"
	}
	uuid := ""
	if res.UUID != "" {
		uuid = " (" + res.UUID + ")"
	}
	fmt.Fprintf(g.r.Stdout, "node %s GPU %d%s: %s, now %s\n", node, res.Index, uuid, res.Reason, health)
	return nil
}
