package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Main runs the skiff command line with args (without the program name).
// It prints any error the kubectl way and returns it; pass it to ExitCode.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r := NewRoot(stdout, stderr)
	r.AddCommand(r.clusterCommands()...)
	return r.Execute(ctx, args)
}

// ExitError carries a process exit status. A command returns one after it
// has printed its own errors (one per object), so Main prints nothing more.
type ExitError struct {
	Code int
	// Err is printed by Main when set.
	Err error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

// errReported is returned by verbs that printed every failure already.
func errReported() error { return &ExitError{Code: 1} }

// ExitCode maps Main's error to a process exit status: 0 for nil, the code
// of an *ExitError, else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code != 0 {
		return ee.Code
	}
	return 1
}

// Root is the `skiff` command: global flags and the shared things every
// verb needs (output streams, the API client, the clock).
//
// The binary's owner adds more commands (up, server, agent, version) with
// AddCommand; Main adds those returned by clusterCommands (cluster_commands.go).
type Root struct {
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader

	// KubeconfigPath is --kubeconfig; "" reads $KUBECONFIG, then
	// $HOME/.skiff/kubeconfig (client.LoadKubeconfig).
	KubeconfigPath string
	// Namespace is -n/--namespace.
	Namespace string
	// Verbosity is -v/--v: 0 quiet, 1 info, 2+ debug.
	Verbosity int
	// As and AsGroups are --as and --as-group: act as another user
	// (impersonation, kubectl's flags).
	As       string
	AsGroups []string

	// NewClient builds the API client. The default reads the kubeconfig;
	// tests set it to return client/fake.
	NewClient func() (client.Interface, error)
	// Now is the clock used for ages and timestamps (tests pin it).
	Now func() time.Time

	cmd *cobra.Command
	cli client.Interface
}

// NewRoot builds the root command with the kubectl verbs.
func NewRoot(stdout, stderr io.Writer) *Root {
	r := &Root{Stdout: stdout, Stderr: stderr, Stdin: os.Stdin, Namespace: "default", Now: time.Now}
	r.NewClient = r.defaultClient
	cmd := &cobra.Command{
		Use:   "skiff",
		Short: "skiff: a small GPU cluster in one binary (control plane, node agent, kubectl-style CLI)",
		Long: `skiff is a whole small GPU cluster in one binary. Start one with ` + "`skiff up`" + `,
then use the kubectl verbs you know: skiff apply -f, get, describe, delete, scale, rollout.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	pf := cmd.PersistentFlags()
	pf.StringVar(&r.KubeconfigPath, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then $HOME/.skiff/kubeconfig, which `skiff up` writes)")
	pf.StringVarP(&r.Namespace, "namespace", "n", "default", "namespace of the request")
	pf.IntVarP(&r.Verbosity, "v", "v", 0, "log verbosity (0-4)")
	pf.StringVar(&r.As, "as", "", "username to impersonate for the operation (the credential needs RBAC's impersonate verb)")
	pf.StringArrayVar(&r.AsGroups, "as-group", nil, "group to impersonate for the operation, repeatable")
	// The kubeconfig context's namespace is the default of -n, as in
	// kubectl (a student's kubeconfig names their namespace).
	cmd.PersistentPreRun = func(*cobra.Command, []string) {
		if r.namespaceFlagSet() {
			return
		}
		if cfg, err := client.LoadKubeconfig(r.KubeconfigPath); err == nil && cfg.Namespace != "" {
			r.Namespace = cfg.Namespace
		}
	}
	_ = cmd.RegisterFlagCompletionFunc("namespace", r.completeNames("namespaces"))
	r.cmd = cmd
	cmd.AddCommand(
		newApplyCmd(r), newCreateCmd(r), newGetCmd(r), newDescribeCmd(r), newDeleteCmd(r),
		newScaleCmd(r), newAutoscaleCmd(r), newRolloutCmd(r), newExplainCmd(r), newTraceCmd(r), newAPIResourcesCmd(r),
		newCompletionCmd(r),
		newExposeCmd(r),
		newWaitCmd(r),
		newDashboardCmd(r),
		newAuthCmd(r), newCertificateCmd(r), // auth.go
	)
	return r
}

// AddCommand adds commands to the root (the binary's up, server, agent, version).
// A command reads the global flags through r (r.KubeconfigPath, r.Verbosity, r.Logger()).
func (r *Root) AddCommand(cmds ...*cobra.Command) { r.cmd.AddCommand(cmds...) }

// Command returns the root cobra command.
func (r *Root) Command() *cobra.Command { return r.cmd }

// Execute runs the command line and prints its error, kubectl style.
func (r *Root) Execute(ctx context.Context, args []string) error {
	r.cmd.SetArgs(args)
	err := r.cmd.ExecuteContext(ctx)
	if err != nil {
		r.printError(err)
	}
	return err
}

// Logger logs to stderr at the level -v asks for.
func (r *Root) Logger() *slog.Logger {
	level := slog.LevelWarn
	switch {
	case r.Verbosity >= 2:
		level = slog.LevelDebug
	case r.Verbosity == 1:
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(r.Stderr, &slog.HandlerOptions{Level: level}))
}

// Client returns the API client, made once per command line.
func (r *Root) Client() (client.Interface, error) {
	if r.cli != nil {
		return r.cli, nil
	}
	c, err := r.NewClient()
	if err != nil {
		return nil, err
	}
	r.cli = c
	return c, nil
}

// ClientConfig is the server, CA and credentials of the kubeconfig's
// current context (--kubeconfig, $KUBECONFIG, $HOME/.skiff/kubeconfig),
// for commands that need more than an Interface (exec's and
// port-forward's upgrades, snapshots).
func (r *Root) ClientConfig() (client.Config, error) {
	cfg, err := client.LoadKubeconfig(r.KubeconfigPath)
	if err != nil {
		return cfg, err
	}
	cfg.Impersonate, cfg.ImpersonateGroups = r.As, r.AsGroups
	return cfg, cfg.Validate()
}

func (r *Root) defaultClient() (client.Interface, error) {
	cfg, err := r.ClientConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	c.SetWarningHandler(warningPrinter(r.Stderr))
	return c, nil
}

// namespaceFlagSet reports whether -n was given explicitly.
func (r *Root) namespaceFlagSet() bool {
	f := r.cmd.PersistentFlags().Lookup("namespace")
	return f != nil && f.Changed
}

// printError prints err like kubectl.
func (r *Root) printError(err error) {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return
	}
	fmt.Fprintln(r.Stderr, errorText(err))
}

// errorText renders an error as kubectl does.
func errorText(err error) string {
	var se *api.StatusError
	if errors.As(err, &se) {
		s := se.Status
		switch s.Reason {
		case api.ReasonInvalid:
			return "The " + s.Message
		case "":
			return "Error from server: " + s.Message
		}
		return fmt.Sprintf("Error from server (%s): %s", s.Reason, s.Message)
	}
	return "error: " + err.Error()
}

// report prints one error line for one object and keeps going.
func (r *Root) report(err error) { fmt.Fprintln(r.Stderr, errorText(err)) }

// reportFor prints err with what was being done:
// `Error from server (AlreadyExists): error when creating "f.yaml": ...`.
func (r *Root) reportFor(doing string, err error) {
	var se *api.StatusError
	if errors.As(err, &se) {
		msg := fmt.Sprintf("%s: %s", doing, se.Status.Message)
		if se.Status.Reason == api.ReasonInvalid {
			fmt.Fprintf(r.Stderr, "%s: The %s\n", doing, se.Status.Message)
			return
		}
		r.report(&api.StatusError{Status: api.Status{Reason: se.Status.Reason, Message: msg}})
		return
	}
	fmt.Fprintf(r.Stderr, "error: %s: %v\n", doing, err)
}
