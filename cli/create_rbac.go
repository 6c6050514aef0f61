package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// `skiff create role|clusterrole|rolebinding|clusterrolebinding`, as
// kubectl's: the objects are built by api.RulesFromFlags and
// api.SubjectsFromFlags; the server checks escalation.

type createRoleCmd struct {
	root                       *Root
	cluster                    bool
	verbs, resources, names    []string
	nonResourceURLs, aggregate []string
}

func newCreateRoleCmd(r *Root, cluster bool) *cobra.Command {
	c := &createRoleCmd{root: r, cluster: cluster}
	use, short := "role NAME --verb=VERB --resource=RESOURCE [--resource-name=NAME]", "Create a role with single rule"
	if cluster {
		use, short = "clusterrole NAME --verb=VERB --resource=RESOURCE [--resource-name=NAME] [--non-resource-url=URL] [--aggregation-rule=KEY=VALUE]", "Create a cluster role"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args[0]) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&c.verbs, "verb", nil, "verb that applies to the resources contained in the rule")
	fl.StringSliceVar(&c.resources, "resource", nil, "resource that the rule applies to")
	fl.StringArrayVar(&c.names, "resource-name", nil, "resource in the white list that the rule applies to, repeat this flag for multiple items")
	if cluster {
		fl.StringSliceVar(&c.nonResourceURLs, "non-resource-url", nil, "a partial url that user should have access to")
		fl.StringSliceVar(&c.aggregate, "aggregation-rule", nil, "an aggregation label selector for combining ClusterRoles (KEY=VALUE)")
	}
	return cmd
}

// Run builds the role and creates it.
func (c *createRoleCmd) Run(ctx context.Context, name string) error {
	var rules []api.PolicyRule
	var err error
	if len(c.aggregate) == 0 && (len(c.resources) > 0 || len(c.nonResourceURLs) == 0) {
		if rules, err = api.RulesFromFlags(c.verbs, c.resources, c.names); err != nil {
			return err
		}
	}
	if len(c.nonResourceURLs) > 0 {
		if len(c.verbs) == 0 {
			return fmt.Errorf("at least one verb must be specified")
		}
		rules = append(rules, api.PolicyRule{Verbs: c.verbs, NonResourceURLs: c.nonResourceURLs})
	}
	if !c.cluster {
		role := &api.Role{ObjectMeta: api.ObjectMeta{Name: name, Namespace: c.root.Namespace}, Rules: rules}
		api.SetTypeMeta(role)
		return c.root.createOne(ctx, role)
	}
	role := &api.ClusterRole{ObjectMeta: api.ObjectMeta{Name: name}, Rules: rules}
	if len(c.aggregate) > 0 {
		sel := map[string]string{}
		for _, kv := range c.aggregate {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("--aggregation-rule %q: want KEY=VALUE", kv)
			}
			sel[k] = v
		}
		role.AggregationRule = &api.AggregationRule{ClusterRoleSelectors: []api.LabelSelector{{MatchLabels: sel}}}
		role.Rules = nil
	}
	api.SetTypeMeta(role)
	return c.root.createOne(ctx, role)
}

type createBindingCmd struct {
	root                           *Root
	cluster                        bool
	clusterRole, role              string
	users, groups, serviceAccounts []string
}

func newCreateBindingCmd(r *Root, cluster bool) *cobra.Command {
	c := &createBindingCmd{root: r, cluster: cluster}
	use, short := "rolebinding NAME --clusterrole=NAME|--role=NAME [--user=USER] [--group=GROUP] [--serviceaccount=NAMESPACE:NAME]", "Create a role binding for a particular role or cluster role"
	if cluster {
		use, short = "clusterrolebinding NAME --clusterrole=NAME [--user=USER] [--group=GROUP] [--serviceaccount=NAMESPACE:NAME]", "Create a cluster role binding for a particular cluster role"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args[0]) },
	}
	fl := cmd.Flags()
	fl.StringVar(&c.clusterRole, "clusterrole", "", "ClusterRole this binding should reference")
	if !cluster {
		fl.StringVar(&c.role, "role", "", "Role this RoleBinding should reference")
	}
	fl.StringArrayVar(&c.users, "user", nil, "usernames to bind to the role, repeatable")
	fl.StringArrayVar(&c.groups, "group", nil, "groups to bind to the role, repeatable")
	fl.StringArrayVar(&c.serviceAccounts, "serviceaccount", nil, "service accounts to bind to the role, in the format <namespace>:<name>, repeatable")
	return cmd
}

// Run builds the binding and creates it.
func (c *createBindingCmd) Run(ctx context.Context, name string) error {
	ref := api.RoleRef{APIGroup: api.RBACGroup}
	switch {
	case c.clusterRole != "" && c.role != "":
		return fmt.Errorf("exactly one of clusterrole or role must be specified")
	case c.clusterRole != "":
		ref.Kind, ref.Name = "ClusterRole", c.clusterRole
	case c.role != "":
		ref.Kind, ref.Name = "Role", c.role
	case c.cluster:
		return fmt.Errorf("required flag(s) \"clusterrole\" not set")
	default:
		return fmt.Errorf("exactly one of clusterrole or role must be specified")
	}
	subjects, err := api.SubjectsFromFlags(c.users, c.groups, c.serviceAccounts)
	if err != nil {
		return err
	}
	if c.cluster {
		b := &api.ClusterRoleBinding{ObjectMeta: api.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
		api.SetTypeMeta(b)
		return c.root.createOne(ctx, b)
	}
	b := &api.RoleBinding{ObjectMeta: api.ObjectMeta{Name: name, Namespace: c.root.Namespace}, RoleRef: ref, Subjects: subjects}
	api.SetTypeMeta(b)
	return c.root.createOne(ctx, b)
}
