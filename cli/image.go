package cli

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	ctrd "skiff.dev/skiff/runtime/containerd"
)

// imageCmd manages the images of this machine's containerd (namespace
// "skiff"), for lab rooms without a registry: import an archive once on
// each machine, and pods with imagePullPolicy IfNotPresent (the default for
// tagged images) start from it.
type imageCmd struct {
	r       *Root
	address string
}

func newImageCmd(r *Root) *cobra.Command {
	ic := &imageCmd{r: r}
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import and list the container images of this machine (offline lab rooms)",
		Long: `Manage the images skiff's node agent on this machine can run. They live in
containerd's "skiff" namespace (ctr -n skiff images ls shows them too).

  skiff image import nginx-alpine.tar     # an OCI layout or docker save archive
  skiff image ls

On a machine with internet access, make the archive with
  docker save nginx:alpine -o nginx-alpine.tar
or  ctr images export nginx-alpine.tar docker.io/library/nginx:alpine`,
	}
	cmd.PersistentFlags().StringVar(&ic.address, "containerd-address", ctrd.DefaultConfig().Address, "containerd socket")
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
	})
	return cmd
}

func (ic *imageCmd) runtime(ctx context.Context) (*ctrd.Runtime, error) {
	cfg := ctrd.DefaultConfig()
	cfg.Address = ic.address
	rt, err := ctrd.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w (images need containerd; run as root)", ic.address, err)
	}
	return rt, nil
}

// Import reads each archive and prints the names it brought in.
func (ic *imageCmd) Import(ctx context.Context, files []string) error {
	rt, err := ic.runtime(ctx)
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
	rt, err := ic.runtime(ctx)
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
