package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/kubectl"
	schedconfig "skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/simnodes"
)

// Options of a run.
type Options struct {
	// Configs to run under, in order; empty: the file's configs, or
	// Kubernetes' defaults named "default".
	Configs []Config
	// StepTimeout bounds how long a step may take to settle (0: 60 s).
	StepTimeout time.Duration
	// Log, or discard (the control plane's log).
	Log *slog.Logger
}

// DefaultStepTimeout bounds a step's settling: simulated nodes settle in
// milliseconds; the longest honest wait is the scheduler's backoff of a
// pod that failed often (podMaxBackoffSeconds, 10 s by default).
const DefaultStepTimeout = 60 * time.Second

// ParseConfigFlag reads a --config value: NAME=FILE, or FILE named after
// its base name without extension (students/alice.yaml is "alice").
func ParseConfigFlag(v string) (Config, error) {
	name, file, ok := strings.Cut(v, "=")
	if !ok {
		file = v
		name = strings.TrimSuffix(filepath.Base(v), filepath.Ext(v))
	}
	if file == "" {
		return Config{}, fmt.Errorf("--config %q: no file", v)
	}
	if err := checkConfigName(name); err != nil {
		return Config{}, fmt.Errorf("--config %q: the name %w (write NAME=FILE)", v, err)
	}
	if _, err := os.Stat(file); err != nil {
		return Config{}, fmt.Errorf("--config %q: %w", v, err)
	}
	return Config{Name: name, File: file}, nil
}

// Result is one configuration's run.
type Result struct {
	Config Config
	Steps  []StepResult
	// Startup is how long the cluster took to start.
	Startup time.Duration
}

// StepResult is what one step did under one configuration.
type StepResult struct {
	// Title is the step's name and action.
	Title string
	// Placements of every pod of the scenario's objects, by owner then
	// name; New marks those placed (or left Pending) by this step.
	Placements []Placement
	// Usage of the GPUs once the step settled.
	Usage Usage
	// Checks are the step's expectations for this configuration.
	Checks []Check
	// Took is how long the step took to settle (real time).
	Took time.Duration
}

// Check is one expectation and its outcome.
type Check struct {
	Expectation string // as written: "job/job-b onNode node-2"
	Failure     string // "" when it holds
}

// Unmet is the error of a run with unmet expectations.
type Unmet struct {
	// Failures: "configuration binpack, step 2 (B and C arrive): ...".
	Failures []string
}

func (u *Unmet) Error() string {
	return fmt.Sprintf("%d unmet expectations:\n  %s", len(u.Failures), strings.Join(u.Failures, "\n  "))
}

// Run runs the scenario under each configuration, one after the other,
// each on a cluster of its own, and returns what each step did. The
// error is *Unmet when the run went through and expectations failed;
// any other error means a run could not be completed.
func Run(ctx context.Context, f *File, opts Options) ([]*Result, error) {
	configs := opts.Configs
	if len(configs) == 0 {
		configs = f.resolvedConfigs()
	}
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = DefaultStepTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	groups, err := f.simGroups()
	if err != nil {
		return nil, err
	}
	// Every configuration loads before any runs: a bad one changes nothing.
	var bad []error
	for _, cfg := range configs {
		if cfg.File == "" {
			continue
		}
		if _, err := schedconfig.Load(cfg.File); err != nil {
			bad = append(bad, fmt.Errorf("configuration %s: %w", cfg.Name, err))
		}
	}
	if len(bad) > 0 {
		return nil, errors.Join(bad...)
	}
	var results []*Result
	unmet := &Unmet{}
	for _, cfg := range configs {
		r, err := runOne(ctx, f, cfg, groups, opts)
		if err != nil {
			return results, fmt.Errorf("configuration %s: %w", cfg.Name, err)
		}
		results = append(results, r)
		for i, s := range r.Steps {
			for _, c := range s.Checks {
				if c.Failure != "" {
					unmet.Failures = append(unmet.Failures, fmt.Sprintf("configuration %s, step %d (%s): %s: %s", cfg.Name, i+1, s.Title, c.Expectation, c.Failure))
				}
			}
		}
	}
	if len(unmet.Failures) > 0 {
		return results, unmet
	}
	return results, nil
}

// resolvedConfigs are the file's configurations with their paths
// resolved, or Kubernetes' defaults named "default" when it has none.
func (f *File) resolvedConfigs() []Config {
	if len(f.Configs) == 0 {
		return []Config{{Name: "default"}}
	}
	out := make([]Config, len(f.Configs))
	for i, c := range f.Configs {
		if c.File != "" {
			c.File = f.path(c.File)
		}
		out[i] = c
	}
	return out
}

// runner runs the steps on one configuration's cluster.
type runner struct {
	f     *File
	cfg   Config
	sc    *simCluster
	opts  Options
	clock time.Duration // the scenario's simulated time
	// timed are the objects applied with runFor: their pods complete
	// once clock reaches when they started plus runFor.
	timed   []timedObjects
	started map[string]time.Duration // pod key → clock when first seen Running
	seen    map[string]bool          // pods shown in an earlier step
	traced  map[string]string        // pod key/uid → the attempt its trace shows
}

type timedObjects struct {
	owners map[string]bool // KIND/NAMESPACE/NAME of the objects
	runFor time.Duration
}

func runOne(ctx context.Context, f *File, cfg Config, groups []simnodes.Config, opts Options) (*Result, error) {
	start := time.Now()
	sc, err := startCluster(ctx, groups, cfg.File, opts.Log)
	if err != nil {
		return nil, err
	}
	defer sc.stop()
	r := &runner{f: f, cfg: cfg, sc: sc, opts: opts, started: map[string]time.Duration{}, seen: map[string]bool{}, traced: map[string]string{}}
	res := &Result{Config: cfg, Startup: time.Since(start)}
	for i := range f.Steps {
		s := &f.Steps[i]
		sr, err := r.step(ctx, s)
		if err != nil {
			return res, fmt.Errorf("step %d (%s): %w", i+1, stepTitle(s), err)
		}
		res.Steps = append(res.Steps, *sr)
	}
	return res, nil
}

// step runs one step, waits for the cluster to settle and checks the
// expectations.
func (r *runner) step(ctx context.Context, s *Step) (*StepResult, error) {
	start := time.Now()
	if err := r.act(ctx, s); err != nil {
		return nil, err
	}
	st, err := r.settle(ctx)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	for _, p := range st.pods {
		if p.Status.Phase == api.PodRunning {
			if _, ok := r.started[api.KeyOf(p)]; !ok {
				r.started[api.KeyOf(p)] = r.clock
			}
		}
	}
	sr := &StepResult{Title: stepTitle(s), Usage: st.usage(), Took: took}
	if sr.Placements, err = r.placements(ctx, st); err != nil {
		return nil, err
	}
	for i := range s.Expect {
		e := &s.Expect[i]
		if !e.appliesTo(r.cfg.Name) {
			continue
		}
		sr.Checks = append(sr.Checks, Check{Expectation: e.String(), Failure: e.check(st, r.f.namespace())})
	}
	return sr, nil
}

// act performs the step's action.
func (r *runner) act(ctx context.Context, s *Step) error {
	switch {
	case s.Apply != nil:
		return r.apply(ctx, s.Apply)
	case s.Delete != nil:
		return r.delete(ctx, s.Delete)
	case s.FailNode != "":
		return r.sc.failNode(s.FailNode)
	case s.Advance != "":
		d, _ := time.ParseDuration(s.Advance) // Validate checked it
		return r.advance(ctx, d)
	}
	return errors.New("a step without an action")
}

// objects decodes the objects of an apply or delete, in the scenario's
// namespace unless they name one.
func (r *runner) objects(o *Objects) ([]api.Document, error) {
	var docs []api.Document
	if o.File != "" {
		data, err := os.ReadFile(r.f.path(o.File))
		if err != nil {
			return nil, err
		}
		docs = api.DecodeStream(data)
	}
	for _, raw := range o.Objects {
		docs = append(docs, api.DecodeStream(raw)...)
	}
	var out []api.Document
	for _, d := range docs {
		if d.Err != nil {
			return nil, d.Err
		}
		m := d.Object.GetObjectMeta()
		if !d.Kind.Namespaced {
			m.Namespace = ""
		} else if m.Namespace == "" {
			m.Namespace = r.f.namespace()
		}
		if len(o.Only) > 0 && !slices.ContainsFunc(o.Only, func(ref string) bool {
			ref2, _ := parseRef(ref, false, "")
			return ref2.Kind == d.Kind && ref2.Name == m.Name
		}) {
			continue
		}
		out = append(out, d)
	}
	if len(o.Only) > 0 && len(out) < len(o.Only) {
		return nil, fmt.Errorf("%s: only %v: %d of them found", o.File, o.Only, len(out))
	}
	return out, nil
}

func (r *runner) apply(ctx context.Context, o *Objects) error {
	docs, err := r.objects(o)
	if err != nil {
		return err
	}
	ap := &kubectl.Applier{Client: r.sc.c, Warnings: io.Discard}
	timed := timedObjects{owners: map[string]bool{}}
	for _, d := range docs {
		if _, err := ap.Apply(ctx, d.Kind, d.Object, nil); err != nil {
			return fmt.Errorf("apply %s %s: %w", strings.ToLower(d.Kind.Kind), api.KeyOf(d.Object), err)
		}
		m := d.Object.GetObjectMeta()
		timed.owners[ownerKey(d.Kind.Kind, m.Namespace, m.Name)] = true
	}
	if o.RunFor != "" {
		timed.runFor, _ = time.ParseDuration(o.RunFor)
		r.timed = append(r.timed, timed)
	}
	return nil
}

func (r *runner) delete(ctx context.Context, o *Objects) error {
	type target struct {
		kind      *api.Kind
		namespace string
		name      string
	}
	var ts []target
	for _, ref := range o.Refs {
		x, _ := parseRef(ref, true, r.f.namespace())
		ts = append(ts, target{x.Kind, x.Namespace, x.Name})
	}
	if o.File != "" || len(o.Objects) > 0 {
		docs, err := r.objects(o)
		if err != nil {
			return err
		}
		for _, d := range docs {
			m := d.Object.GetObjectMeta()
			ts = append(ts, target{d.Kind, m.Namespace, m.Name})
		}
	}
	for _, t := range ts {
		err := r.sc.c.Delete(ctx, t.kind, t.namespace, t.name, api.DeleteOptions{PropagationPolicy: "Background"})
		if err != nil {
			return fmt.Errorf("delete %s %s: %w", strings.ToLower(t.kind.Kind), t.name, err)
		}
	}
	return nil
}

// advance moves the clock and completes the pods whose time is up.
func (r *runner) advance(ctx context.Context, d time.Duration) error {
	r.clock += d
	st, err := r.read(ctx)
	if err != nil {
		return err
	}
	for _, p := range st.pods {
		start, ok := r.started[api.KeyOf(p)]
		if !ok || p.Status.Phase != api.PodRunning {
			continue
		}
		runFor, ok := r.runFor(st, p)
		if !ok || start+runFor > r.clock {
			continue
		}
		if err := r.sc.sim(p.Spec.NodeName).Complete(ctx, p.Namespace, p.Name); err != nil {
			return err
		}
	}
	return nil
}

// runFor is how long pod p runs: the runFor of the apply that made it
// (or its owner, or its owner's owner).
func (r *runner) runFor(st *state, p *api.Pod) (time.Duration, bool) {
	keys := st.ownerChain(p)
	for i := len(r.timed) - 1; i >= 0; i-- {
		for _, k := range keys {
			if r.timed[i].owners[k] {
				return r.timed[i].runFor, true
			}
		}
	}
	return 0, false
}

// stepTitle is a step's name, or its action.
func stepTitle(s *Step) string {
	if s.Name != "" {
		return s.Name
	}
	switch {
	case s.Apply != nil:
		return "apply " + s.Apply.describe()
	case s.Delete != nil:
		return "delete " + s.Delete.describe()
	case s.FailNode != "":
		return "node " + s.FailNode + " fails"
	default:
		return "time advances " + s.Advance
	}
}

func (o *Objects) describe() string {
	switch {
	case o.File != "" && len(o.Only) > 0:
		return strings.Join(o.Only, ", ") + " of " + o.File
	case o.File != "":
		return o.File
	case len(o.Refs) > 0:
		return strings.Join(o.Refs, ", ")
	}
	return fmt.Sprintf("%d inline objects", len(o.Objects))
}

func ownerKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }
