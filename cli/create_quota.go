package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

// createQuotaCmd is `create quota NAME --hard=K=V,... [--scopes=S,...]`,
// as kubectl's.
type createQuotaCmd struct {
	root         *Root
	name         string
	hard, scopes string
}

func newCreateQuotaCmd(r *Root) *cobra.Command {
	c := &createQuotaCmd{root: r}
	cmd := &cobra.Command{
		Use:     "quota NAME [--hard=key1=value1,key2=value2] [--scopes=Scope1,Scope2]",
		Aliases: []string{"resourcequota"},
		Short:   "Create a quota with the specified name",
		Example: `  skiff create quota gpus -n alice --hard=requests.nvidia.com/gpu=1,requests.cpu=4,pods=10
  skiff create quota best-effort --hard=pods=100 --scopes=BestEffort`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.name = args[0]
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&c.hard, "hard", "", "a comma-delimited set of resource=quantity pairs that define a hard limit")
	cmd.Flags().StringVar(&c.scopes, "scopes", "", "a comma-delimited set of quota scopes that must all match each object tracked by the quota")
	return cmd
}

// Run creates the quota.
func (c *createQuotaCmd) Run(ctx context.Context) error {
	q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: c.name, Namespace: c.root.Namespace}}
	if c.hard != "" {
		hard, err := parseResourcePairs(c.hard)
		if err != nil {
			return err
		}
		q.Spec.Hard = hard
	}
	if c.scopes != "" {
		q.Spec.Scopes = strings.Split(c.scopes, ",")
	}
	api.SetTypeMeta(q)
	return c.root.createOne(ctx, q)
}

// parseResourcePairs reads kubectl's resource=quantity,... (create
// quota's --hard) in kubectl's words.
func parseResourcePairs(s string) (api.ResourceList, error) {
	out := api.ResourceList{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("invalid argument syntax %v, expected <resource>=<value>", pair)
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("invalid quantity %q for %s: %w", v, k, err)
		}
		out[k] = qty
	}
	return out, nil
}
