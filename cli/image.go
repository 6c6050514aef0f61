package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/cluster"
)

// imageCmd manages the images of this machine's containerd, for lab rooms
// without a registry: import an archive once on each machine, and pods with
// imagePullPolicy IfNotPresent (the default for tagged images) start from
// it. The images go where this machine's node looks: the containerd
// address and namespace of --containerd-address and --containerd-namespace
// when given, else those the last `skiff up`, `server` or `agent` on this
// machine ran with (recorded in ~/.skiff/containerd.json), else the
// defaults (/run/containerd/containerd.sock, namespace skiff).
type imageCmd struct {
	r         *Root
	address   string
	namespace string
	cmd       *cobra.Command
}

func newImageCmd(r *Root) *cobra.Command { return (&imageCmd{r: r}).command() }

func (ic *imageCmd) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import and list the container images of this machine (offline lab rooms)",
		Long: `Manage the images skiff's node agent on this machine can run. They live in
the node's containerd namespace, "skiff" unless the node was started with
--containerd-namespace (ctr -n skiff images ls shows them too). Without flags,
the containerd address and namespace are those of the last skiff up, server or
agent on this machine.

  skiff image import nginx-alpine.tar     # an OCI layout or docker save archive
  skiff image ls

On a machine with internet access, make the archive with
  docker save nginx:alpine -o nginx-alpine.tar
or  ctr images export nginx-alpine.tar docker.io/library/nginx:alpine`,
	}
	ic.cmd = cmd
	cmd.PersistentFlags().StringVar(&ic.address, "containerd-address", cluster.DefaultContainerd().Address, "containerd socket (default: the local node's)")
	cmd.PersistentFlags().StringVar(&ic.namespace, "containerd-namespace", cluster.DefaultContainerd().Namespace, "containerd namespace of skiff's images (default: the local node's)")
	cmd.AddCommand(&cobra.Command{
		Use:   "import FILE...",
		Short: "Import images from OCI or docker archives",
		Args:  cobra.MinimumNArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return ic.Import(cmd.Context(), args) },
	}, &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images present",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return ic.List(cmd.Context()) },
	}, ic.selfCommand())
	return cmd
}

// selfCommand is `skiff image self`: an image of this skiff binary, for
// skiff's device plugin DaemonSet.
func (ic *imageCmd) selfCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:   "self",
		Short: "Make an image of this skiff binary (" + cluster.SkiffImageName + ") and import it, for skiff's device plugin DaemonSet",
		Long: `Make a container image of this skiff binary, named ` + cluster.SkiffImageName + ` unless --name
says otherwise, and import it into this machine's containerd, where the node's
pods find it (imagePullPolicy IfNotPresent: nothing is pulled). The DaemonSet
examples/workloads/skiff-device-plugin-daemonset.yaml runs ` + "`skiff device-plugin`" + `
from it on the nodes started with --device-plugin=external.

The image holds the binary at ` + cluster.SkiffImagePath + ` and, because skiff is built with
cgo, the shared libraries ` + "`ldd`" + ` lists for it (glibc and its loader), at the
same paths, with LD_LIBRARY_PATH set: nothing else. A statically linked skiff
gets none. The NVIDIA driver is not in it (go-nvml loads libnvidia-ml.so.1 at
run time): in the image, skiff sees simulated GPUs only.

With -o FILE the image is written as an OCI archive instead, for
` + "`skiff image import FILE`" + ` on another machine with the same architecture.`,
		Example: `  skiff image self
  skiff image self -o skiff-image.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return ic.Self(cmd.Context(), name, output) },
	}
	cmd.Flags().StringVar(&name, "name", cluster.SkiffImageName, "name of the image")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the image as an OCI archive to this file instead of importing it")
	return cmd
}

// Self makes the image of this binary and imports it (or writes it to
// output), then says what it holds.
func (ic *imageCmd) Self(ctx context.Context, name, output string) error {
	var names, libs []string
	var err error
	if output != "" {
		libs, err = cluster.WriteSelfImage(output, name)
		names = []string{name}
	} else {
		names, libs, err = cluster.ImportSelfImage(ctx, ic.runtimeConfig(), name)
	}
	if err != nil {
		return err
	}
	what := "the skiff binary, statically linked"
	if len(libs) > 0 {
		what = fmt.Sprintf("the skiff binary and the %d shared libraries it loads: %s", len(libs), strings.Join(libs, ", "))
	}
	for _, n := range names {
		if output != "" {
			fmt.Fprintf(ic.r.Stdout, "image/%s written to %s (%s)\n", n, output, what)
		} else {
			fmt.Fprintf(ic.r.Stdout, "image/%s imported (%s)\n", n, what)
		}
	}
	return nil
}

// runtimeConfig is the containerd the images go to: flags given on the
// command line first, then what the local node recorded, then the defaults.
func (ic *imageCmd) runtimeConfig() cluster.Containerd {
	cfg := cluster.DefaultContainerd()
	if rec, err := cluster.RecordedContainerd(); err == nil {
		if rec.Address != "" {
			cfg.Address = rec.Address
		}
		if rec.Namespace != "" {
			cfg.Namespace = rec.Namespace
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		ic.r.Logger().Warn("read the local node's containerd", "err", err)
	}
	fl := ic.cmd.PersistentFlags()
	if fl.Changed("containerd-address") {
		cfg.Address = ic.address
	}
	if fl.Changed("containerd-namespace") {
		cfg.Namespace = ic.namespace
	}
	return cfg
}

// Import reads each archive and prints the names it brought in.
func (ic *imageCmd) Import(ctx context.Context, files []string) error {
	rt, err := cluster.OpenImages(ctx, ic.runtimeConfig())
	if err != nil {
		return err
	}
	defer rt.Close()
	failed := false
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			ic.r.report(err)
			failed = true
			continue
		}
		names, err := rt.ImportImage(ctx, fh)
		fh.Close()
		if err != nil {
			ic.r.report(fmt.Errorf("import %s: %w", f, err))
			failed = true
			continue
		}
		for _, n := range names {
			fmt.Fprintf(ic.r.Stdout, "image/%s imported\n", n)
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

// List prints the images with their digest and size.
func (ic *imageCmd) List(ctx context.Context) error {
	rt, err := cluster.OpenImages(ctx, ic.runtimeConfig())
	if err != nil {
		return err
	}
	defer rt.Close()
	imgs, err := rt.ListImages(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(ic.r.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE")
	for _, im := range imgs {
		d := im.Digest
		if len(d) > 19 {
			d = d[:19]
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fMiB\n", im.Name, d, float64(im.Size)/(1<<20))
	}
	return tw.Flush()
}
