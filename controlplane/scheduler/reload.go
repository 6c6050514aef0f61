package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

// Runner runs the scheduler a configuration file describes and applies
// changes to the file without a restart of skiff: each valid change is
// built into a new Scheduler (its profiles and plugins made, as at
// start), and only when that succeeds is the running one stopped (its
// bindings in flight finish) and the new one started; it lists nodes and
// pods again and tries every pending pod under the new configuration. A
// change that does not parse or build is refused with its error logged,
// and the running scheduler keeps going as it was.
type Runner struct {
	client client.Interface
	path   string
	opts   Options

	mu   sync.Mutex
	cur  *Scheduler
	next chan *Scheduler
}

// NewRunner loads the configuration at path (config.Default when path is
// "") and builds its scheduler; an invalid file is an error here, as for
// kube-scheduler at start. clientConnection.kubeconfig, when the file
// sets it, replaces c: the scheduler talks to the API server it names.
func NewRunner(c client.Interface, path string, opts Options) (*Runner, error) {
	r := &Runner{client: c, path: path, opts: opts, next: make(chan *Scheduler, 1)}
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	s, err := r.build(cfg)
	if err != nil {
		return nil, err
	}
	r.cur = s
	return r, nil
}

func (r *Runner) build(cfg *config.Config) (*Scheduler, error) {
	c := r.client
	if cfg.Kubeconfig != "" {
		kc, err := client.LoadKubeconfig(cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("clientConnection.kubeconfig: %w", err)
		}
		if c, err = client.New(kc); err != nil {
			return nil, fmt.Errorf("clientConnection.kubeconfig: %w", err)
		}
	}
	return New(c, cfg, r.opts)
}

// Current returns the scheduler running now.
func (r *Runner) Current() *Scheduler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Run runs the scheduler until ctx ends, watching the file (when there
// is one) and switching to each valid change. It returns when ctx ends,
// or with the scheduler's error if it stops on its own.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if r.path != "" {
		wg.Go(func() {
			err := config.Watch(ctx, r.path, r.opts.Logger, func(cfg *config.Config) error {
				s, err := r.build(cfg)
				if err != nil {
					return err
				}
				select { // a newer change replaces one not yet started
				case <-r.next:
				default:
				}
				r.next <- s
				return nil
			})
			if err != nil && r.opts.Logger != nil {
				r.opts.Logger.Error("scheduler config: changes will not be applied", "err", err)
			}
		})
	}
	for {
		s := r.Current()
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(sctx) }()
		select {
		case err := <-done:
			stop()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("scheduler stopped")
			}
			return err
		case <-ctx.Done():
			stop()
			<-done
			return nil
		case n := <-r.next:
			stop()
			<-done // bindings in flight finish first
			r.mu.Lock()
			r.cur = n
			r.mu.Unlock()
		}
	}
}
