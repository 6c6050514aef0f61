package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// waitCmd is `skiff wait --for=condition=NAME[=VALUE]|delete TYPE/NAME...`,
// as kubectl wait: each object is watched (not polled) until its
// status.conditions has NAME with status VALUE (True by default; names
// and values compared without case, a condition whose observedGeneration
// is older than the object's generation does not count), or until it is
// deleted. It prints "job.batch/pi condition met" per object.
type waitCmd struct {
	root    *Root
	forExpr string
	timeout time.Duration
}

func newWaitCmd(r *Root) *cobra.Command {
	c := &waitCmd{root: r}
	cmd := &cobra.Command{
		Use:   "wait --for=condition=NAME[=VALUE]|delete (TYPE NAME... | TYPE/NAME...) [--timeout=30s]",
		Short: "Wait for a condition on one or more objects",
		Long: `Wait until each object has a condition (status.conditions, e.g. condition=complete
for a Job, condition=Ready for a pod, condition=Available=false) or is deleted.
skiff's wait takes names (not -l or --all) and --for=condition or --for=delete.`,
		Example: `  skiff wait --for=condition=complete job/pi --timeout=60s
  skiff wait --for=delete pod/web-1`,
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
	cmd.Flags().StringVar(&c.forExpr, "for", "", "condition=NAME[=VALUE] or delete")
	cmd.Flags().DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait; 0 checks once, negative waits a week")
	return cmd
}

// waitFor is a parsed --for.
type waitFor struct {
	deleted   bool
	condition string
	value     string
}

func parseWaitFor(s string) (waitFor, error) {
	switch {
	case s == "":
		return waitFor{}, errors.New("--for must be set: condition=NAME[=VALUE] or delete")
	case strings.EqualFold(s, "delete"):
		return waitFor{deleted: true}, nil
	case strings.HasPrefix(strings.ToLower(s), "condition="):
		cond := s[len("condition="):]
		name, value, ok := strings.Cut(cond, "=")
		if !ok {
			value = "true"
		}
		if name == "" {
			return waitFor{}, fmt.Errorf("--for=%s: a condition name is required", s)
		}
		return waitFor{condition: name, value: value}, nil
	}
	return waitFor{}, fmt.Errorf("unrecognized condition: %q (skiff's wait supports --for=condition=NAME[=VALUE] and --for=delete, not jsonpath= or create)", s)
}

// Run waits for every object in turn, within one timeout.
func (c *waitCmd) Run(ctx context.Context, args []string) error {
	f, err := parseWaitFor(c.forExpr)
	if err != nil {
		return err
	}
	refs, err := parseResourceArgs("wait", args)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	timeout := c.timeout
	if timeout < 0 {
		timeout = 7 * 24 * time.Hour
	}
	once := timeout == 0 // kubectl: --timeout=0 checks once
	if !once {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	visited := 0
	for _, ref := range refs {
		if len(ref.Names) == 0 {
			return errors.New("resource(s) were provided, but no name was specified")
		}
		ns := c.root.namespaceFor(ref.Kind, false)
		for _, name := range ref.Names {
			visited++
			if err := waitOne(ctx, cl, ref.Kind, ns, name, f, once); err != nil {
				if errors.Is(err, errNotYet) || errors.Is(err, context.DeadlineExceeded) || (ctx.Err() != nil && !api.IsNotFound(err)) {
					return fmt.Errorf("timed out waiting for the condition on %s/%s", ref.Kind.Resource, name)
				}
				return err
			}
			fmt.Fprintf(c.root.Stdout, "%s condition met\n", objectRef(ref.Kind, name))
		}
	}
	if visited == 0 {
		return errors.New("no matching resources found")
	}
	return nil
}

// errNotYet: --timeout=0 and the object does not meet the condition.
var errNotYet = errors.New("condition not met")

// waitOne returns nil once the object meets f, watching it from the
// version it read; a watch that ends is started again from a fresh read.
// With once, it does not watch: errNotYet when the object does not meet f.
func waitOne(ctx context.Context, cl client.Interface, k *api.Kind, ns, name string, f waitFor, once bool) error {
	uid := ""
	for {
		o, err := cl.Get(ctx, k, ns, name)
		if api.IsNotFound(err) && f.deleted {
			return nil
		}
		if err != nil {
			return err
		}
		m := o.GetObjectMeta()
		if f.deleted && uid != "" && m.UID != uid {
			return nil // deleted and made again: the one we waited for is gone
		}
		uid = m.UID
		if !f.deleted && conditionMet(o, f) {
			return nil
		}
		if once {
			return errNotYet
		}
		w, err := cl.Watch(ctx, k, ns, api.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: m.ResourceVersion})
		if err != nil {
			return err
		}
		done := false
		for ev := range w.Events() {
			if f.deleted && ev.Type == api.Deleted {
				done = true
				break
			}
			if !f.deleted && ev.Type != api.Deleted && ev.Object != nil && conditionMet(ev.Object, f) {
				done = true
				break
			}
		}
		w.Stop()
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// conditionMet reads status.conditions of any kind, as kubectl's
// ConditionalWait does on unstructured objects.
func conditionMet(o api.Object, f waitFor) bool {
	b, err := json.Marshal(o)
	if err != nil {
		return false
	}
	var u struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
		Status struct {
			Conditions []struct {
				Type               string `json:"type"`
				Status             string `json:"status"`
				ObservedGeneration int64  `json:"observedGeneration"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(b, &u) != nil {
		return false
	}
	for _, c := range u.Status.Conditions {
		if !strings.EqualFold(c.Type, f.condition) {
			continue
		}
		if c.ObservedGeneration != 0 && u.Metadata.Generation != 0 && c.ObservedGeneration < u.Metadata.Generation {
			continue
		}
		return strings.EqualFold(c.Status, f.value)
	}
	return false
}
