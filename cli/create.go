package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// createCmd is `skiff create`: imperative creation, as kubectl create.
type createCmd struct {
	root      *Root
	files     []string
	recursive bool
}

func newCreateCmd(r *Root) *cobra.Command {
	c := &createCmd{root: r}
	cmd := &cobra.Command{
		Use:   "create -f FILENAME | create namespace|deployment|configmap|job|role|clusterrole|rolebinding|clusterrolebinding|quota NAME",
		Short: "Create a resource from a file or from arguments",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context()) },
	}
	cmd.Flags().StringArrayVarP(&c.files, "filename", "f", nil, "file, directory or - for stdin")
	cmd.Flags().BoolVarP(&c.recursive, "recursive", "R", false, "process directories recursively")
	cmd.AddCommand(newCreateNamespaceCmd(r), newCreateDeploymentCmd(r), newCreateConfigMapCmd(r), newCreateJobCmd(r), newCreateQuotaCmd(r),
		newCreateRoleCmd(r, false), newCreateRoleCmd(r, true), newCreateBindingCmd(r, false), newCreateBindingCmd(r, true)) // create_rbac.go
	return cmd
}

// Run creates every object of the files; existing ones are errors.
func (c *createCmd) Run(ctx context.Context) error {
	paths, err := expandFiles(c.files, c.recursive)
	if err != nil {
		return err
	}
	manifests, err := readManifests(paths, c.root.Stdin)
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	failed := false
	for _, m := range manifests {
		for _, d := range m.Docs {
			if d.Err == nil {
				d.Err = c.root.prepareObject(d.Kind, d.Object)
			}
			if d.Err != nil {
				failed = true
				fmt.Fprintf(c.root.Stderr, "error: %s: %s: %v\n", m.Source, describeDoc(d), d.Err)
				continue
			}
			if err := createAndReport(ctx, c.root, cl, d.Kind, d.Object); err != nil {
				failed = true
			}
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// createAndReport creates obj and prints `kind/name created`, or the error.
func createAndReport(ctx context.Context, r *Root, cl client.Interface, k *api.Kind, obj api.Object) error {
	created, err := cl.Create(ctx, obj)
	if err != nil {
		r.report(err)
		return err
	}
	fmt.Fprintf(r.Stdout, "%s created\n", objectRef(k, created.GetObjectMeta().Name))
	return nil
}

// createOne runs createAndReport as a command's result.
func (r *Root) createOne(ctx context.Context, obj api.Object) error {
	k := api.MustKindOf(obj)
	if err := r.prepareObject(k, obj); err != nil {
		return err
	}
	cl, err := r.Client()
	if err != nil {
		return err
	}
	if err := createAndReport(ctx, r, cl, k, obj); err != nil {
		return errReported()
	}
	return nil
}

// createNamespaceCmd is `create namespace NAME`.
type createNamespaceCmd struct {
	root *Root
	name string
}

func newCreateNamespaceCmd(r *Root) *cobra.Command {
	c := &createNamespaceCmd{root: r}
	return &cobra.Command{
		Use:     "namespace NAME",
		Aliases: []string{"ns"},
		Short:   "Create a namespace",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.name = args[0]
			return c.Run(cmd.Context())
		},
	}
}

// Run creates the namespace.
func (c *createNamespaceCmd) Run(ctx context.Context) error {
	ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: c.name}}
	api.SetTypeMeta(ns)
	return c.root.createOne(ctx, ns)
}

// createDeploymentCmd is `create deployment NAME --image=IMG`.
type createDeploymentCmd struct {
	root     *Root
	name     string
	images   []string
	replicas int32
	port     int32
}

func newCreateDeploymentCmd(r *Root) *cobra.Command {
	c := &createDeploymentCmd{root: r}
	cmd := &cobra.Command{
		Use:     "deployment NAME --image=IMAGE [--replicas=N] [--port=PORT]",
		Aliases: []string{"deploy"},
		Short:   "Create a deployment",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.name = args[0]
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringSliceVar(&c.images, "image", nil, "image of the container (repeat for several containers)")
	cmd.Flags().Int32Var(&c.replicas, "replicas", 1, "number of replicas")
	cmd.Flags().Int32Var(&c.port, "port", -1, "the port the container exposes")
	return cmd
}

// Run builds the deployment as kubectl does (label app=NAME) and creates it.
func (c *createDeploymentCmd) Run(ctx context.Context) error {
	d, err := c.deployment()
	if err != nil {
		return err
	}
	return c.root.createOne(ctx, d)
}

func (c *createDeploymentCmd) deployment() (*api.Deployment, error) {
	if len(c.images) == 0 {
		return nil, fmt.Errorf("required flag(s) \"image\" not set")
	}
	if c.replicas < 0 {
		return nil, fmt.Errorf("--replicas must be 0 or more, got %d", c.replicas)
	}
	labels := map[string]string{"app": c.name}
	var containers []api.Container
	for _, img := range c.images {
		ct := api.Container{Name: containerNameFor(img), Image: img}
		if c.port >= 0 {
			ct.Ports = []api.ContainerPort{{ContainerPort: c.port}}
		}
		containers = append(containers, ct)
	}
	replicas := c.replicas
	d := &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: c.name, Labels: labels},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": c.name}},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": c.name}},
				Spec:       api.PodSpec{Containers: containers},
			},
		},
	}
	api.SetTypeMeta(d)
	return d, nil
}

var nonNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// containerNameFor names a container after its image: "nginx:alpine" → "nginx".
func containerNameFor(image string) string {
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, "@")
	name, _, _ = strings.Cut(name, ":")
	name = strings.Trim(nonNameChars.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if name == "" {
		return "app"
	}
	return name
}

// createConfigMapCmd is `create configmap NAME --from-literal k=v --from-file PATH`.
type createConfigMapCmd struct {
	root     *Root
	name     string
	literals []string
	files    []string
}

func newCreateConfigMapCmd(r *Root) *cobra.Command {
	c := &createConfigMapCmd{root: r}
	cmd := &cobra.Command{
		Use:     "configmap NAME [--from-literal=KEY=VALUE] [--from-file=[KEY=]PATH]",
		Aliases: []string{"cm"},
		Short:   "Create a config map from literals or files",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.name = args[0]
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringArrayVar(&c.literals, "from-literal", nil, "KEY=VALUE; repeatable")
	cmd.Flags().StringArrayVar(&c.files, "from-file", nil, "[KEY=]PATH of a file (key: its base name); repeatable")
	return cmd
}

// Run builds and creates the config map.
func (c *createConfigMapCmd) Run(ctx context.Context) error {
	cm, err := c.configMap()
	if err != nil {
		return err
	}
	return c.root.createOne(ctx, cm)
}

func (c *createConfigMapCmd) configMap() (*api.ConfigMap, error) {
	data := map[string]string{}
	add := func(k, v string) error {
		if _, dup := data[k]; dup {
			return fmt.Errorf("cannot add key %q, another key by that name already exists", k)
		}
		data[k] = v
		return nil
	}
	for _, l := range c.literals {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid literal source %q, expected key=value", l)
		}
		if err := add(k, v); err != nil {
			return nil, err
		}
	}
	for _, f := range c.files {
		k, path, ok := strings.Cut(f, "=")
		if !ok {
			k, path = filepath.Base(f), f
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read --from-file %s: %w", path, err)
		}
		if err := add(k, string(b)); err != nil {
			return nil, err
		}
	}
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: c.name}}
	if len(data) > 0 {
		cm.Data = data
	}
	api.SetTypeMeta(cm)
	return cm, nil
}
