package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
)

// createJobCmd is `create job NAME --image=IMAGE -- [COMMAND] [args...]`,
// as kubectl create job: one container named after the job, restartPolicy
// Never; the server generates the selector and labels.
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
		Example: "  skiff create job pi --image=busybox -- echo hi",
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
	cmd.Flags().StringVar(&c.from, "from", "", "not supported: skiff has no CronJobs")
	return cmd
}

// Run builds the job and creates it.
func (c *createJobCmd) Run(ctx context.Context) error {
	j, err := c.job()
	if err != nil {
		return err
	}
	return c.root.createOne(ctx, j)
}

func (c *createJobCmd) job() (*api.Job, error) {
	if c.from != "" {
		return nil, errors.New("--from=" + c.from + ": skiff has no CronJobs (batch/v1 CronJob is not served), so a job cannot be created from one; use --image")
	}
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
