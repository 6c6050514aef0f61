package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// logsCmd is `skiff logs`: a container's output, read by the agent of the
// pod's node and passed on by the API server (GET .../pods/NAME/log).
type logsCmd struct {
	r         *Root
	container string
	follow    bool
	tail      int
	tailSet   bool // --tail given, even as -1: kubectl's default of 10 with -l is for the unset flag only
	selector  string
	previous  bool
	prefix    bool
}

func newLogsCmd(r *Root) *cobra.Command {
	l := &logsCmd{r: r}
	cmd := &cobra.Command{
		Use:   "logs [-f] [-p] (POD | TYPE/NAME) [-c CONTAINER]",
		Short: "Print the logs of a container in a pod",
		Long: `Print the logs of a container in a pod. TYPE/NAME (deployment/web) picks the
first pod of that object's selector, as kubectl does; -l prints the logs of
every pod the selector matches. With several containers, -c names one (the
first is used otherwise).`,
		Example: `  skiff logs web-7c5ddbdf54-x2x8k
  skiff logs deployment/web -f --tail 20
  skiff logs -l app=web --prefix
  skiff logs crashy --previous`,
		RunE: func(cmd *cobra.Command, args []string) error {
			l.tailSet = cmd.Flags().Changed("tail")
			return l.Run(cmd.Context(), args)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&l.container, "container", "c", "", "container name (default: the first)")
	fl.BoolVarP(&l.follow, "follow", "f", false, "keep streaming the logs")
	fl.IntVar(&l.tail, "tail", -1, "lines of recent log to show (-1: all; 10 with -l unless given)")
	fl.StringVarP(&l.selector, "selector", "l", "", "label selector: logs of every matching pod")
	fl.BoolVarP(&l.previous, "previous", "p", false, "the logs of the previous, terminated instance of the container")
	fl.BoolVar(&l.prefix, "prefix", false, "prefix each line with [pod/NAME/CONTAINER]")
	return cmd
}

// logStreamer is the part of *client.Client that logs needs.
type logStreamer interface {
	Stream(ctx context.Context, path string) (io.ReadCloser, error)
}

// Run prints the logs.
func (l *logsCmd) Run(ctx context.Context, args []string) error {
	switch {
	case l.selector == "" && len(args) != 1:
		return errors.New("expected POD or TYPE/NAME (or -l SELECTOR): skiff logs POD [-c CONTAINER]")
	case l.selector != "" && len(args) > 0:
		return errors.New("only a selector (-l) or a POD name is allowed")
	}
	c, err := l.r.Client()
	if err != nil {
		return err
	}
	st, ok := c.(logStreamer)
	if !ok {
		return errors.New("logs need an HTTP connection to the API server")
	}
	ns := l.r.Namespace
	var pods []*api.Pod
	if l.selector != "" {
		list, _, err := client.List[*api.Pod](ctx, c, ns, api.ListOptions{LabelSelector: l.selector})
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintf(l.r.Stderr, "No resources found in %s namespace.\n", ns)
			return nil
		}
		pods = list
		if !l.tailSet {
			l.tail = 10 // kubectl's default with a selector; an explicit --tail=-1 means all
		}
	} else {
		p, err := resolvePod(ctx, c, ns, args[0])
		if err != nil {
			return err
		}
		pods = []*api.Pod{p}
	}

	out := &lockedWriter{w: l.r.Stdout}
	streams := make([]func() error, 0, len(pods))
	for _, p := range pods {
		name := l.container
		if name == "" {
			name = defaultContainer(p, l.r.Stderr)
		}
		var w io.Writer = out
		if l.prefix {
			w = &prefixWriter{w: out, prefix: fmt.Sprintf("[pod/%s/%s] ", p.Name, name)}
		}
		streams = append(streams, func() error { return l.stream(ctx, st, p, name, w) })
	}
	if !l.follow || len(streams) == 1 {
		var errs []error
		for _, s := range streams {
			if err := s(); err != nil {
				if len(streams) == 1 {
					return err
				}
				l.r.report(err)
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errReported()
		}
		return nil
	}
	// Following several pods: all at once, lines interleaved.
	var wg sync.WaitGroup
	errs := make([]error, len(streams))
	for i, s := range streams {
		wg.Go(func() { errs[i] = s() })
	}
	wg.Wait()
	failed := false
	for _, err := range errs {
		if err != nil {
			l.r.report(err)
			failed = true
		}
	}
	if failed {
		return errReported()
	}
	return nil
}

func (l *logsCmd) stream(ctx context.Context, st logStreamer, p *api.Pod, container string, w io.Writer) error {
	q := url.Values{}
	q.Set("container", container)
	if l.follow {
		q.Set("follow", "true")
	}
	if l.tail >= 0 {
		q.Set("tailLines", strconv.Itoa(l.tail))
	}
	if l.previous {
		q.Set("previous", "true")
	}
	body, err := st.Stream(ctx, client.PathFor(api.MustKindOf(&api.Pod{}), p.Namespace, p.Name, "log")+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(w, body)
	if f, ok := w.(*prefixWriter); ok {
		f.flush()
	}
	if err != nil && ctx.Err() != nil {
		return nil // Ctrl-C while following
	}
	return err
}

// defaultContainer is the first container; with several, it says so, as kubectl does.
func defaultContainer(p *api.Pod, stderr io.Writer) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	if len(p.Spec.Containers) > 1 {
		var names []string
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		fmt.Fprintf(stderr, "Defaulted container %q out of: %s\n", names[0], strings.Join(names, ", "))
	}
	return p.Spec.Containers[0].Name
}

// resolvePod reads "NAME", "pod/NAME" or "TYPE/NAME" (deployment/web,
// replicaset/web-123): for the latter, the first pod of the object's
// selector, preferring running and ready pods, as kubectl does.
func resolvePod(ctx context.Context, c client.Interface, ns, arg string) (*api.Pod, error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok {
		return client.Get[*api.Pod](ctx, c, ns, arg)
	}
	k, err := api.LookupResource(typ)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("%q: a name is required after the type", arg)
	}
	if k == api.MustKindOf(&api.Pod{}) {
		return client.Get[*api.Pod](ctx, c, ns, name)
	}
	o, err := c.Get(ctx, k, ns, name)
	if err != nil {
		return nil, err
	}
	var ls *api.LabelSelector
	switch t := o.(type) {
	case *api.Deployment:
		ls = t.Spec.Selector
	case *api.ReplicaSet:
		ls = t.Spec.Selector
	case *api.Job:
		ls = t.Spec.Selector
	default:
		return nil, fmt.Errorf("cannot find the pods of a %s: only pods, deployments, replicasets and jobs", k.Kind)
	}
	sel, err := ls.AsSelector()
	if err != nil {
		return nil, fmt.Errorf("selector of %s/%s: %w", strings.ToLower(k.Kind), name, err)
	}
	pods, _, err := client.List[*api.Pod](ctx, c, ns, api.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("no pods found for %s/%s", strings.ToLower(k.Kind), name)
	}
	slices.SortStableFunc(pods, func(a, b *api.Pod) int {
		if d := logRank(b) - logRank(a); d != 0 {
			return d
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return pods[0], nil
}

// logRank ranks pods for logs and exec: on a node, running, ready.
func logRank(p *api.Pod) int {
	n := 0
	if p.Spec.NodeName != "" {
		n += 4
	}
	if p.Status.Phase == api.PodRunning {
		n += 2
	}
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady && c.Status == api.ConditionTrue {
			n++
		}
	}
	if p.DeletionTimestamp != nil {
		n -= 8
	}
	return n
}

// lockedWriter serialises writes of concurrent streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter writes whole lines, each with prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}

// flush writes a last line without its newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		_, _ = p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
}
