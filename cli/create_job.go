package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// createJobCmd is `create job NAME --image=IMAGE -- [COMMAND] [args...]`,
// as kubectl create job: one container named after the job, restartPolicy
// Never; the server generates the selector and labels. With
// --from=cronjob/CJ the job is the CronJob's template, owned by it
// (api.NewManualJob).
type createJobCmd struct {
	root    *Root
	name    string
	image   string
	from    string
	command []string
}

func newCreateJobCmd(r *Root) *cobra.Command {
	c := &createJobCmd{root: r}
	cmd := &cobra.Command{
		Use:     "job NAME --image=IMAGE -- [COMMAND] [args...]",
		Short:   "Create a job that runs a command to completion",
		Example: "  skiff create job pi --image=busybox -- echo hi\n  skiff create job hello-now --from=cronjob/hello",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.name, c.command = args[0], args[1:]
			if n := cmd.ArgsLenAtDash(); n >= 0 && n != 1 {
				return errors.New("exactly one NAME is required, got " + strings.Join(args[:n], " "))
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 1 {
				return errors.New("exactly one NAME is required; put the command after --")
			}
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&c.image, "image", "", "image of the job's container")
	cmd.Flags().StringVar(&c.from, "from", "", "the cronjob to make the job from (cronjob/NAME)")
	return cmd
}

// Run builds the job and creates it.
func (c *createJobCmd) Run(ctx context.Context) error {
	if c.from != "" {
		return c.fromCronJob(ctx)
	}
	j, err := c.job()
	if err != nil {
		return err
	}
	return c.root.createOne(ctx, j)
}

// fromCronJob is kubectl's createJobFromCronJob, with its refusals.
func (c *createJobCmd) fromCronJob(ctx context.Context) error {
	switch {
	case c.image != "":
		return errors.New("either --image or --from must be specified")
	case len(c.command) > 0:
		return errors.New("cannot specify --from and command")
	}
	refs, err := parseResourceArgs("create job", []string{c.from})
	if err != nil {
		return err
	}
	if len(refs) != 1 || len(refs[0].Names) != 1 {
		return errors.New("from must be an existing cronjob")
	}
	if refs[0].Kind.Kind != "CronJob" {
		return fmt.Errorf("from must be an existing cronjob, not %s", refs[0].Kind.GroupResource())
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	cj, err := client.Get[*api.CronJob](ctx, cl, c.root.Namespace, refs[0].Names[0])
	if err != nil {
		return err
	}
	return c.root.createOne(ctx, api.NewManualJob(cj, c.name))
}

func (c *createJobCmd) job() (*api.Job, error) {
	if c.image == "" {
		return nil, errors.New("--image must be specified")
	}
	j := &api.Job{
		ObjectMeta: api.ObjectMeta{Name: c.name},
		Spec: api.JobSpec{Template: api.PodTemplateSpec{Spec: api.PodSpec{
			Containers:    []api.Container{{Name: c.name, Image: c.image, Command: c.command}},
			RestartPolicy: api.RestartNever,
		}}},
	}
	api.SetTypeMeta(j)
	return j, nil
}
