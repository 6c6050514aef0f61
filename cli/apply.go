package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/kubectl"
)

// applyCmd is `skiff apply -f`: create what is missing, update what
// differs, leave the rest, one result line per object. The three-way
// patch is client/kubectl's (Applier).
//
// A file is all or nothing at the client: every document of a file is
// decoded and validated first, and a file with a bad document applies none
// of its documents (each problem is printed). Server rejections are printed
// per object; the others are still applied.
type applyCmd struct {
	root      *Root
	files     []string
	recursive bool
	output    string
}

func newApplyCmd(r *Root) *cobra.Command {
	c := &applyCmd{root: r}
	cmd := &cobra.Command{
		Use:   "apply -f FILENAME",
		Short: "Apply a configuration to resources from files, directories or stdin",
		Example: `  skiff apply -f nginx-demo.yaml
  skiff apply -f examples/
  cat pod.yaml | skiff apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&c.files, "filename", "f", nil, "file, directory (*.yaml, *.yml, *.json) or - for stdin; repeatable")
	f.BoolVarP(&c.recursive, "recursive", "R", false, "process directories recursively")
	f.StringVarP(&c.output, "output", "o", "", "output format: name (default: a result line per object)")
	return cmd
}

// Run applies every file.
func (c *applyCmd) Run(ctx context.Context) error {
	if c.output != "" && c.output != "name" {
		return fmt.Errorf("unsupported output format %q for apply: only name", c.output)
	}
	paths, err := expandFiles(c.files, c.recursive)
	if err != nil {
		return err
	}
	manifests, err := readManifests(paths, c.root.Stdin)
	if err != nil {
		return err
	}
	failed := false
	var valid []manifest
	for _, m := range manifests {
		if c.checkManifest(m) {
			valid = append(valid, m)
		} else {
			failed = true
		}
	}
	if len(valid) == 0 {
		return errReported()
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	ap := &kubectl.Applier{Client: cl, Warnings: c.root.Stderr}
	for _, m := range valid {
		written := kubectl.WrittenFields(m.Data)
		for _, d := range m.Docs {
			k := d.Kind
			result, err := ap.Apply(ctx, k, d.Object, written[kubectl.DocKey{Index: d.Index, Path: d.Path}])
			if err != nil {
				failed = true
				c.root.reportFor(fmt.Sprintf("error when applying %s from %q", describeDoc(d), m.Source), err)
				continue
			}
			ref := objectRef(k, d.Object.GetObjectMeta().Name)
			if c.output == "name" {
				fmt.Fprintln(c.root.Stdout, ref)
			} else {
				fmt.Fprintf(c.root.Stdout, "%s %s\n", ref, result)
			}
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// checkManifest decodes, places and validates every document of m. It
// prints each problem and reports whether m may be applied.
func (c *applyCmd) checkManifest(m manifest) bool {
	bad := 0
	for _, d := range m.Docs {
		err := d.Err
		if err == nil && (d.Object == nil || d.Kind == nil) {
			err = errors.New("no object decoded")
		}
		if err == nil {
			err = c.root.prepareObject(d.Kind, d.Object)
		}
		if err == nil && d.Object.GetObjectMeta().Name == "" {
			err = errors.New("metadata.name: Required value (apply cannot use generateName)")
		}
		if err == nil {
			obj := api.Clone(d.Object)
			api.SetDefaults(obj)
			if errs := api.Validate(obj); len(errs) > 0 {
				err = api.NewInvalid(d.Kind, obj.GetObjectMeta().Name, errs)
			}
		}
		switch {
		case d.Err != nil:
			bad++ // a *api.DecodeError names its document and line itself
			fmt.Fprintf(c.root.Stderr, "error: %s: %v\n", m.Source, d.Err)
		case err != nil:
			bad++
			fmt.Fprintf(c.root.Stderr, "error: %s: %s: %s\n", m.Source, describeDoc(d), strings.TrimPrefix(errorText(err), "error: "))
		}
	}
	if bad > 0 {
		fmt.Fprintf(c.root.Stderr, "error: %s: nothing applied from this file: %d of %d documents are invalid\n", m.Source, bad, len(m.Docs))
		return false
	}
	if len(m.Docs) == 0 {
		fmt.Fprintf(c.root.Stderr, "error: %s: no objects passed to apply\n", m.Source)
		return false
	}
	return true
}
