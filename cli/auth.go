package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// `skiff auth can-i|whoami|reconcile` and `skiff certificate
// approve|deny`, as kubectl's: the questions go to the API server
// (SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview);
// reconcile merges as kubectl (client/kubectl.Reconcile).

func newAuthCmd(r *Root) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Inspect authorization"}
	cmd.AddCommand(newCanICmd(r), newWhoamiCmd(r), newReconcileCmd(r))
	return cmd
}

type canICmd struct {
	r                *Root
	list, all, quiet bool
	noHeaders        bool
	subresource      string
}

func newCanICmd(r *Root) *cobra.Command {
	c := &canICmd{r: r}
	cmd := &cobra.Command{
		Use:   "can-i VERB [TYPE | TYPE/NAME | NONRESOURCEURL]",
		Short: "Check whether an action is allowed",
		Example: `  skiff auth can-i create pods -n alice
  skiff auth can-i list pods -n bob --as alice
  skiff auth can-i --list -n alice`,
		RunE: func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
	}
	cmd.Flags().BoolVar(&c.list, "list", false, "list all allowed actions in the namespace")
	cmd.Flags().BoolVarP(&c.all, "all-namespaces", "A", false, "check in all namespaces")
	cmd.Flags().BoolVarP(&c.quiet, "quiet", "q", false, "print nothing; the exit code says")
	cmd.Flags().BoolVar(&c.noHeaders, "no-headers", false, "with --list: print no header row")
	cmd.Flags().StringVar(&c.subresource, "subresource", "", "subresource, such as pod/log or deployment/scale")
	return cmd
}

// Run asks the server and prints yes or no (exit 1 for no), or the list.
func (c *canICmd) Run(ctx context.Context, args []string) error {
	cl, err := c.r.Client()
	if err != nil {
		return err
	}
	if c.list {
		return c.runList(ctx, cl)
	}
	if len(args) < 2 {
		return fmt.Errorf("you must specify two arguments: verb resource or verb resource/resourceName")
	}
	review := &api.SelfSubjectAccessReview{}
	if strings.HasPrefix(args[1], "/") {
		review.Spec.NonResourceAttributes = &api.NonResourceAttributes{Verb: args[0], Path: args[1]}
	} else {
		ra := &api.ResourceAttributes{Verb: args[0], Subresource: c.subresource}
		if !c.all {
			ra.Namespace = c.r.Namespace
		}
		res, name, _ := strings.Cut(args[1], "/")
		ra.Resource, ra.Name = res, name
		if res != "*" {
			if k, err := api.LookupResource(res); err == nil {
				ra.Group, ra.Resource = k.Group, k.Resource
				if !k.Namespaced {
					ra.Namespace = ""
				}
			} else if g, r, ok := strings.Cut(res, "."); ok {
				ra.Resource, ra.Group = g, r
				fmt.Fprintf(c.r.Stderr, "Warning: the server doesn't have a resource type '%s'\n", res)
			} else {
				fmt.Fprintf(c.r.Stderr, "Warning: the server doesn't have a resource type '%s'\n", res)
			}
		} else {
			ra.Group = "*"
		}
		review.Spec.ResourceAttributes = ra
	}
	api.SetTypeMeta(review)
	out, err := cl.Create(ctx, review)
	if err != nil {
		return err
	}
	st := out.(*api.SelfSubjectAccessReview).Status
	if !c.quiet {
		if st.Allowed {
			fmt.Fprintln(c.r.Stdout, "yes")
		} else {
			line := "no"
			if st.Reason != "" {
				line += " - " + st.Reason
			}
			if st.EvaluationError != "" {
				line += " - " + st.EvaluationError
			}
			fmt.Fprintln(c.r.Stdout, line)
		}
	}
	if !st.Allowed {
		return &ExitError{Code: 1}
	}
	return nil
}

// runList prints the rules of the namespace as kubectl's table.
func (c *canICmd) runList(ctx context.Context, cl client.Interface) error {
	ns := c.r.Namespace
	if c.all {
		ns = ""
	}
	review := &api.SelfSubjectRulesReview{Spec: api.SelfSubjectRulesReviewSpec{Namespace: ns}}
	api.SetTypeMeta(review)
	out, err := cl.Create(ctx, review)
	if err != nil {
		return err
	}
	st := out.(*api.SelfSubjectRulesReview).Status
	if st.Incomplete {
		fmt.Fprintf(c.r.Stderr, "warning: the list may be incomplete: %v\n", st.EvaluationError)
	}
	tw := newTabWriter(c.r.Stdout)
	if !c.noHeaders {
		fmt.Fprintln(tw, kubectl.AccessHeader)
	}
	for _, r := range kubectl.AccessList(st) {
		fmt.Fprintln(tw, kubectl.AccessRow(r))
	}
	return tw.Flush()
}

func brackets(l []string) string { return "[" + strings.Join(l, " ") + "]" }

type whoamiCmd struct{ r *Root }

func newWhoamiCmd(r *Root) *cobra.Command {
	c := &whoamiCmd{r: r}
	return &cobra.Command{Use: "whoami", Short: "Print who the API server says you are", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context()) }}
}

// Run prints the user's name and groups, as kubectl's table.
func (c *whoamiCmd) Run(ctx context.Context) error {
	cl, err := c.r.Client()
	if err != nil {
		return err
	}
	review := &api.SelfSubjectReview{}
	api.SetTypeMeta(review)
	out, err := cl.Create(ctx, review)
	if err != nil {
		return err
	}
	u := out.(*api.SelfSubjectReview).Status.UserInfo
	tw := newTabWriter(c.r.Stdout)
	fmt.Fprintln(tw, "ATTRIBUTE\tVALUE")
	fmt.Fprintf(tw, "Username\t%s\n", u.Username)
	if u.UID != "" {
		fmt.Fprintf(tw, "UID\t%s\n", u.UID)
	}
	fmt.Fprintf(tw, "Groups\t%s\n", brackets(u.Groups))
	return tw.Flush()
}

type reconcileCmd struct {
	r                                       *Root
	files                                   []string
	removeExtraPermissions, removeExtraSubj bool
}

func newReconcileCmd(r *Root) *cobra.Command {
	c := &reconcileCmd{r: r}
	cmd := &cobra.Command{
		Use:   "reconcile -f FILENAME",
		Short: "Reconciles rules for RBAC role, role binding, cluster role, and cluster role binding objects",
		Long: `Reconcile RBAC objects with those of a file, as kubectl auth reconcile: missing ones are
created, missing rules and subjects added; extra ones stay unless --remove-extra-permissions
or --remove-extra-subjects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context()) },
	}
	cmd.Flags().StringArrayVarP(&c.files, "filename", "f", nil, "file, directory or - for stdin")
	cmd.Flags().BoolVar(&c.removeExtraPermissions, "remove-extra-permissions", false, "remove extra permissions added to roles")
	cmd.Flags().BoolVar(&c.removeExtraSubj, "remove-extra-subjects", false, "remove extra subjects added to rolebindings")
	return cmd
}

// Run reconciles every RBAC object of the files.
func (c *reconcileCmd) Run(ctx context.Context) error {
	if len(c.files) == 0 {
		return fmt.Errorf("must specify one of -f and -k")
	}
	paths, err := expandFiles(c.files, false)
	if err != nil {
		return err
	}
	manifests, err := readManifests(paths, c.r.Stdin)
	if err != nil {
		return err
	}
	cl, err := c.r.Client()
	if err != nil {
		return err
	}
	for _, m := range manifests {
		for _, d := range m.Docs {
			if d.Err != nil {
				return fmt.Errorf("%s: %w", m.Source, d.Err)
			}
			if d.Kind.Group != api.RBACGroup {
				continue // kubectl auth reconcile skips what is not RBAC
			}
			if err := c.r.prepareObject(d.Kind, d.Object); err != nil {
				return err
			}
			op, err := kubectl.Reconcile(ctx, cl, d.Object, kubectl.ReconcileOptions{RemoveExtraPermissions: c.removeExtraPermissions, RemoveExtraSubjects: c.removeExtraSubj})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.r.Stdout, "%s reconciled\n", objectRef(d.Kind, d.Object.GetObjectMeta().Name))
			if op != "" {
				fmt.Fprintf(c.r.Stdout, "\treconciliation required %s\n", op)
			}
		}
	}
	return nil
}

type certificateCmd struct {
	r       *Root
	approve bool
	force   bool
}

func newCertificateCmd(r *Root) *cobra.Command {
	cmd := &cobra.Command{Use: "certificate", Short: "Modify certificate resources"}
	for _, approve := range []bool{true, false} {
		c := &certificateCmd{r: r, approve: approve}
		verb := "deny"
		if approve {
			verb = "approve"
		}
		sub := &cobra.Command{
			Use:   verb + " NAME...",
			Short: strings.ToUpper(verb[:1]) + verb[1:] + " a certificate signing request",
			Args:  cobra.MinimumNArgs(1),
			RunE:  func(cmd *cobra.Command, args []string) error { return c.Run(cmd.Context(), args) },
		}
		sub.Flags().BoolVar(&c.force, "force", false, "update the CSR even if it is already approved or denied")
		cmd.AddCommand(sub)
	}
	return cmd
}

// Run approves or denies each request, as kubectl certificate.
func (c *certificateCmd) Run(ctx context.Context, names []string) error {
	cfg, err := c.r.ClientConfig()
	if err != nil {
		return err
	}
	cl, err := client.New(cfg)
	if err != nil {
		return err
	}
	for _, name := range names {
		csr, err := client.Get[*api.CertificateSigningRequest](ctx, cl, "", name)
		if err != nil {
			return err
		}
		verb, t, reason, msg := "denied", api.CertificateDenied, "KubectlDeny", "This CSR was denied by kubectl certificate deny."
		if c.approve {
			verb, t, reason, msg = "approved", api.CertificateApproved, "KubectlApprove", "This CSR was approved by kubectl certificate approve."
		}
		if cond := api.CSRCondition(csr, t); cond != nil && !c.force {
			fmt.Fprintf(c.r.Stdout, "certificatesigningrequest.certificates.k8s.io/%s %s\n", name, verb)
			continue
		}
		if err := client.Approve(ctx, cl, csr, c.approve, reason, msg); err != nil {
			return err
		}
		fmt.Fprintf(c.r.Stdout, "certificatesigningrequest.certificates.k8s.io/%s %s\n", name, verb)
	}
	return nil
}
