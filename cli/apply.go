package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// applyCmd is `skiff apply -f`: create what is missing, update what
// differs, leave the rest, one result line per object.
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
	for _, m := range valid {
		for _, d := range m.Docs {
			k := d.Kind
			result, err := applyObject(ctx, cl, k, d.Object)
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

// applyObject creates obj, or updates the live object to match it. It
// returns "created", "configured" or "unchanged".
func applyObject(ctx context.Context, cl client.Interface, k *api.Kind, obj api.Object) (string, error) {
	m := obj.GetObjectMeta()
	for attempt := 0; ; attempt++ {
		cur, err := cl.Get(ctx, k, m.Namespace, m.Name)
		if api.IsNotFound(err) {
			if _, err := cl.Create(ctx, obj); err != nil {
				return "", err
			}
			return "created", nil
		}
		if err != nil {
			return "", err
		}
		desired, err := mergeForApply(k, cur, obj)
		if err != nil {
			return "", err
		}
		same, err := sameObject(desired, cur)
		if err != nil {
			return "", err
		}
		if same {
			return "unchanged", nil
		}
		_, err = cl.Update(ctx, desired)
		if api.IsConflict(err) && attempt < 3 {
			continue // someone wrote in between: read again
		}
		if err != nil {
			return "", err
		}
		return "configured", nil
	}
}

// serverAnnotationPrefixes mark annotations that controllers write on
// objects users apply (the deployment's revision): apply keeps them.
var serverAnnotationPrefixes = [...]string{"deployment.kubernetes.io/"}

// mergeForApply builds the object to write: spec, data, labels and
// annotations from the file; identity, server-set metadata and status from
// the live object; fields the server allocates (a Service's clusterIP and
// node ports, a pod's node) kept when the file leaves them out.
func mergeForApply(k *api.Kind, cur, file api.Object) (api.Object, error) {
	fm, err := toMap(file)
	if err != nil {
		return nil, err
	}
	cm, err := toMap(cur)
	if err != nil {
		return nil, err
	}
	meta, _ := cm["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	fmeta, _ := fm["metadata"].(map[string]any)
	if l, ok := fmeta["labels"]; ok {
		meta["labels"] = l
	} else {
		delete(meta, "labels")
	}
	ann := map[string]any{}
	if fa, ok := fmeta["annotations"].(map[string]any); ok {
		for key, v := range fa {
			ann[key] = v
		}
	}
	if ca, ok := meta["annotations"].(map[string]any); ok {
		for key, v := range ca {
			for _, p := range serverAnnotationPrefixes {
				if _, inFile := ann[key]; !inFile && strings.HasPrefix(key, p) {
					ann[key] = v
				}
			}
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	} else {
		delete(meta, "annotations")
	}
	fm["metadata"] = meta
	if st, ok := cm["status"]; ok {
		fm["status"] = st
	} else {
		delete(fm, "status")
	}
	data, err := json.Marshal(fm)
	if err != nil {
		return nil, err
	}
	out := k.New()
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("merge %s: %w", k.Kind, err)
	}
	keepAllocated(out, cur)
	api.SetDefaults(out)
	return out, nil
}

// keepAllocated copies fields the server or controllers fill in when the
// applied object leaves them empty.
func keepAllocated(out, cur api.Object) {
	switch o := out.(type) {
	case *api.Namespace:
		// The API server owns a namespace's finalizers.
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = cur.(*api.Namespace).Spec.Finalizers
		}
	case *api.Service:
		c := cur.(*api.Service)
		if o.Spec.ClusterIP == "" {
			o.Spec.ClusterIP = c.Spec.ClusterIP
			if len(o.Spec.ClusterIPs) == 0 {
				o.Spec.ClusterIPs = c.Spec.ClusterIPs
			}
		}
		for i := range o.Spec.Ports {
			p := &o.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, cp := range c.Spec.Ports {
				if cp.Port == p.Port && (cp.Protocol == p.Protocol || p.Protocol == "") {
					p.NodePort = cp.NodePort
				}
			}
		}
	case *api.Pod:
		c := cur.(*api.Pod)
		if o.Spec.NodeName == "" {
			o.Spec.NodeName = c.Spec.NodeName
		}
	case *api.Deployment:
		c := cur.(*api.Deployment)
		keepRestartedAt(&o.Spec.Template, &c.Spec.Template)
	}
}

// keepRestartedAt keeps `rollout restart`'s template annotation so that a
// later apply of the unchanged file does not roll the pods again.
func keepRestartedAt(out, cur *api.PodTemplateSpec) {
	v, ok := cur.Annotations[api.AnnotationRestartedAt]
	if !ok {
		return
	}
	if _, set := out.Annotations[api.AnnotationRestartedAt]; set {
		return
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[api.AnnotationRestartedAt] = v
}

// sameObject compares two objects by their JSON form.
func sameObject(a, b api.Object) (bool, error) {
	am, err := toMap(withTypeMeta(a))
	if err != nil {
		return false, err
	}
	bm, err := toMap(withTypeMeta(b))
	if err != nil {
		return false, err
	}
	for _, m := range []map[string]any{am, bm} {
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "managedFields")
		}
	}
	return reflect.DeepEqual(am, bm), nil
}

func toMap(o api.Object) (map[string]any, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}
