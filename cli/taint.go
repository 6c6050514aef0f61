package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/kubectl"
)

// taintCmd is `skiff taint nodes NODE key=value:Effect... key:Effect-...`,
// as kubectl taint: add taints, or remove them with a trailing "-"
// ("key-" removes every effect of the key).
type taintCmd struct {
	root      *Root
	overwrite bool
}

func newTaintCmd(r *Root) *cobra.Command {
	c := &taintCmd{root: r}
	cmd := &cobra.Command{
		Use:   "taint nodes NODE KEY[=VALUE]:EFFECT ... KEY[:EFFECT]-",
		Short: "Update the taints on a node",
		Long: `Add or remove taints. A taint repels pods that do not tolerate it:
NoSchedule keeps new pods away, PreferNoSchedule avoids the node when another fits,
NoExecute also evicts running pods that do not tolerate it.`,
		Example: `  skiff taint nodes gpu-1 dedicated=training:NoSchedule
  skiff taint nodes gpu-1 dedicated:NoSchedule-
  skiff taint node/gpu-1 dedicated-`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
	cmd.Flags().BoolVar(&c.overwrite, "overwrite", false, "replace a taint with the same key and effect")
	return cmd
}

// taintSpec is one argument: a taint to add, or one to remove.
type taintSpec struct {
	taint  api.Taint
	remove bool
}

func (s taintSpec) String() string {
	if s.taint.Effect == "" {
		return s.taint.Key
	}
	return s.taint.Key + ":" + s.taint.Effect
}

// parseTaint reads key=value:Effect, key:Effect, key:Effect- and key-.
func parseTaint(arg string) (taintSpec, error) {
	var s taintSpec
	spec := arg
	if strings.HasSuffix(spec, "-") {
		s.remove = true
		spec = strings.TrimSuffix(spec, "-")
	}
	kv, effect, hasEffect := strings.Cut(spec, ":")
	if !hasEffect && !s.remove {
		return s, fmt.Errorf("invalid taint spec: %s, at least one taint update is required", arg)
	}
	key, value, _ := strings.Cut(kv, "=")
	s.taint = api.Taint{Key: key, Value: value, Effect: effect}
	if key == "" {
		return s, fmt.Errorf("invalid taint spec: %s, key is required", arg)
	}
	if hasEffect || !s.remove {
		switch effect {
		case api.TaintEffectNoSched, api.TaintEffectPrefNo, api.TaintEffectNoExec:
		default:
			return s, fmt.Errorf("invalid taint spec: %s, invalid taint effect: %s, unsupported taint effect", arg, effect)
		}
	}
	return s, nil
}

// Run applies the taint changes to the node.
func (c *taintCmd) Run(ctx context.Context, args []string) error {
	node, rest, err := nodeArg("taint", args)
	if err != nil {
		return err
	}
	var specs []taintSpec
	for _, a := range rest {
		s, err := parseTaint(a)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 {
		return fmt.Errorf("at least one taint update is required")
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	adding := false
	var editErr error
	_, err = kubectl.UpdateNode(ctx, cl, node, func(n *api.Node) bool {
		editErr, adding = nil, false
		taints := append([]api.Taint(nil), n.Spec.Taints...)
		for _, s := range specs {
			if s.remove {
				kept := taints[:0:0]
				for _, t := range taints {
					if t.Key != s.taint.Key || s.taint.Effect != "" && t.Effect != s.taint.Effect {
						kept = append(kept, t)
					}
				}
				if len(kept) == len(taints) {
					editErr = fmt.Errorf("taint %q not found", s.String())
					return false
				}
				taints = kept
				continue
			}
			adding = true
			replaced := false
			for i, t := range taints {
				if t.Key == s.taint.Key && t.Effect == s.taint.Effect {
					if !c.overwrite {
						editErr = fmt.Errorf("node %s already has %s taint(s) with same effect(s) and --overwrite is false", node, t.Key)
						return false
					}
					taints[i] = s.taint
					replaced = true
				}
			}
			if !replaced {
				taints = append(taints, s.taint)
			}
		}
		n.Spec.Taints = taints
		return true
	})
	if err == nil {
		err = editErr
	}
	if err != nil {
		return err
	}
	verb := "untainted"
	if adding {
		verb = "tainted"
	}
	fmt.Fprintf(c.root.Stdout, "%s %s\n", objectRef(nodeKind, node), verb)
	return nil
}

// nodeArg reads "nodes NODE rest..." or "node/NODE rest...".
func nodeArg(verb string, args []string) (node string, rest []string, err error) {
	if kind, name, ok := strings.Cut(args[0], "/"); ok {
		k, err := api.LookupResource(kind)
		if err != nil {
			return "", nil, err
		}
		if k != nodeKind {
			return "", nil, fmt.Errorf("invalid resource type %s, only nodes are supported", k.Resource)
		}
		return name, args[1:], nil
	}
	k, err := api.LookupResource(args[0])
	if err != nil {
		return "", nil, err
	}
	if k != nodeKind {
		return "", nil, fmt.Errorf("invalid resource type %s, only nodes are supported", k.Resource)
	}
	if len(args) < 2 {
		return "", nil, fmt.Errorf("resource(s) were provided, but no name was specified")
	}
	return args[1], args[2:], nil
}
