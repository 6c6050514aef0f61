package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// classroomCmd is `classroom create|status|delete ROOM`: a room of
// students in one command. The logic is client/kubectl's (classroom.go); this
// reads the flags and prints.
type classroomCmd struct {
	root                         *Root
	students                     int
	names                        []string
	roster                       string
	hard                         string
	defaultRequest, defaultLimit string
	dir                          string
	expiration                   time.Duration
}

func newClassroomCmd(r *Root) *cobra.Command {
	c := &classroomCmd{root: r}
	cmd := &cobra.Command{
		Use:   "classroom create|status|delete ROOM",
		Short: "Set up, list or tear down a room of students: a namespace, quota, edit binding and kubeconfig each",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	create := &cobra.Command{
		Use:   "create ROOM (--roster FILE | --names a,b,... | --students N) [--hard LIST] [--default-request LIST --default-limit LIST] [--dir DIR] [--expiration D]",
		Short: "For each student: a namespace, a ResourceQuota, a RoleBinding of edit, and DIR/NAME.kubeconfig",
		Long: `For each student (one a line in --roster, or --names, or ROOM-01 .. ROOM-N for
--students N), with your credential:
  - the namespace NAME, labelled ` + api.LabelClassroom + `=ROOM;
  - the ResourceQuota "student" with --hard, and with --default-request or
    --default-limit the LimitRange "student" of those container defaults;
  - the RoleBinding "student-edit" of the ClusterRole edit to the user NAME;
  - DIR/NAME.kubeconfig: a client certificate (CN=NAME, O=ROOM) from the
    CertificateSigningRequest API (signer kubernetes.io/kube-apiserver-client,
    approved with your credential), NAME its context's namespace.
Everything is checked before the first write: a bad roster line, quota or
default, or a namespace that exists and is not the room's, changes nothing.
Run it again to add students or change the quota: what exists is kept or
brought back to the room's, and a kubeconfig is issued again only when it is
missing or its certificate is near its end.`,
		Example: `  skiff classroom create gpu-lab --roster students.txt --hard=requests.nvidia.com/gpu=1,pods=10 --dir ./kubeconfigs
  skiff classroom create gpu-lab --names alice,bob --default-request=cpu=100m,memory=128Mi --default-limit=cpu=1,memory=1Gi
  skiff classroom create gpu-lab --students 40`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.create(cmd.Context(), args[0]) },
	}
	fl := create.Flags()
	fl.StringVar(&c.roster, "roster", "", "the students, one name a line (# comments); - reads stdin")
	fl.StringSliceVar(&c.names, "names", nil, "the students' names (each a user and a namespace)")
	fl.IntVar(&c.students, "students", 0, "this many students, named ROOM-01 .. ROOM-N")
	fl.StringVar(&c.hard, "hard", "requests.nvidia.com/gpu=1,pods=20", "each student's quota: resource=quantity pairs, as create quota --hard")
	fl.StringVar(&c.defaultRequest, "default-request", "", "containers' default requests in each namespace (a LimitRange), e.g. cpu=100m,memory=128Mi")
	fl.StringVar(&c.defaultLimit, "default-limit", "", "containers' default limits in each namespace (a LimitRange), e.g. cpu=1,memory=1Gi")
	fl.StringVar(&c.dir, "dir", "", "where to write NAME.kubeconfig (default ./ROOM)")
	fl.DurationVar(&c.expiration, "expiration", 0, "how long new certificates are valid (at least 10m; default and at most a year)")
	status := &cobra.Command{
		Use:   "status ROOM",
		Short: "List the room's students: their namespace, edit binding and quota (used/hard)",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return c.status(cmd.Context(), args[0]) },
	}
	del := &cobra.Command{
		Use:   "delete ROOM",
		Short: "Delete the room's namespaces (labelled " + api.LabelClassroom + "=ROOM) and all in them",
		Long: `Delete the namespaces labelled ` + api.LabelClassroom + `=ROOM, and with them the students'
work, quotas and bindings. The kubeconfig files stay where they were written;
their certificates cannot be revoked (as in Kubernetes) but grant nothing once
the bindings are gone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.delete(cmd.Context(), args[0]) },
	}
	cmd.AddCommand(create, status, del)
	return cmd
}

// studentNames reads whichever of --roster, --names and --students was given.
func (c *classroomCmd) studentNames(room string) ([]string, error) {
	given := 0
	for _, set := range []bool{c.roster != "", len(c.names) > 0, c.students != 0} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return nil, errors.New("no students: give --roster FILE, --names a,b,... or --students N")
	case given > 1:
		return nil, errors.New("--roster, --names and --students: give one")
	case c.students < 0:
		return nil, fmt.Errorf("--students %d: want a positive number", c.students)
	case c.students > 0:
		return kubectl.StudentNames(room, c.students), nil
	case len(c.names) > 0:
		return c.names, nil
	}
	var in io.Reader = c.root.Stdin
	if c.roster != "-" {
		f, err := os.Open(c.roster)
		if err != nil {
			return nil, fmt.Errorf("roster: %w", err)
		}
		defer f.Close()
		in = f
	}
	return kubectl.ParseRoster(in, c.roster)
}

func (c *classroomCmd) create(ctx context.Context, name string) error {
	students, err := c.studentNames(name)
	if err != nil {
		return err
	}
	room := kubectl.Classroom{Name: name, Students: students, Dir: c.dir, Expiration: c.expiration}
	if room.Dir == "" {
		room.Dir = name
	}
	for _, f := range []struct {
		flag, value string
		into        *api.ResourceList
	}{{"hard", c.hard, &room.Hard}, {"default-request", c.defaultRequest, &room.DefaultRequest}, {"default-limit", c.defaultLimit, &room.DefaultLimit}} {
		if f.value == "" {
			continue
		}
		if *f.into, err = parseResourcePairs(f.value); err != nil {
			return fmt.Errorf("--%s: %w", f.flag, err)
		}
	}
	cfg, err := c.root.ClientConfig()
	if err != nil {
		return err
	}
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	csrClient, err := client.New(cfg) // connects at its first request
	if err != nil {
		return err
	}
	teacher := kubectl.Teacher{Client: cl, Cluster: cfg, Issue: kubectl.CSRIssuer(csrClient),
		Progress: func(s string) { fmt.Fprintln(c.root.Stdout, s) }}
	if err := kubectl.CreateClassroom(ctx, teacher, room); err != nil {
		return err
	}
	fmt.Fprintf(c.root.Stdout, "room %s: %d students; give each their kubeconfig from %s\n", name, len(students), room.Dir)
	return nil
}

func (c *classroomCmd) status(ctx context.Context, room string) error {
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	students, err := kubectl.ClassroomStatus(ctx, cl, room)
	if err != nil {
		return err
	}
	if len(students) == 0 {
		fmt.Fprintf(c.root.Stderr, "No students found in room %s (no namespace labelled %s=%s).\n", room, api.LabelClassroom, room)
		return nil
	}
	quotaCells := table.For(api.MustKindOf(&api.ResourceQuota{})).Cells
	now := c.root.Now()
	w := newTabWriter(c.root.Stdout)
	fmt.Fprintln(w, "STUDENT\tSTATUS\tROLE\tREQUEST\tLIMIT\tAGE")
	for _, s := range students {
		role, request, limit := "<none>", "<none>", "<none>"
		if s.Bound {
			role = "edit"
		}
		if s.Quota != nil {
			cells := quotaCells(s.Quota, now)
			request, limit = orNone(cells[1].(string)), orNone(cells[2].(string))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Namespace.Status.Phase, role, request, limit, age(now, s.Namespace.CreationTimestamp.Time))
	}
	return w.Flush()
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "<none>"
	}
	return s
}

func (c *classroomCmd) delete(ctx context.Context, room string) error {
	cl, err := c.root.Client()
	if err != nil {
		return err
	}
	gone, err := kubectl.DeleteClassroom(ctx, cl, room, func(s string) { fmt.Fprintln(c.root.Stdout, s) })
	if err == nil && len(gone) == 0 {
		fmt.Fprintf(c.root.Stderr, "No students found in room %s (no namespace labelled %s=%s).\n", room, api.LabelClassroom, room)
	}
	return err
}
