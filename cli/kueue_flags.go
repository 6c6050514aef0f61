package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/controlplane/kueue"
)

// kueueFlags are the waitForPodsReady settings of the queue manager
// (controlplane/kueue) for `up` and `server`: on a Kueue cluster they are
// the waitForPodsReady section of Kueue's Configuration (the
// kueue-manager-config ConfigMap); each flag's help names its field there.
type kueueFlags struct {
	timeout      time.Duration
	backoffBase  time.Duration
	backoffMax   time.Duration
	backoffLimit int32
	registered   bool
}

func (k *kueueFlags) register(cmd *cobra.Command) {
	def := kueue.DefaultConfig().WaitForPodsReady
	fl := cmd.Flags()
	k.registered = true
	fl.DurationVar(&k.timeout, "kueue-pods-ready-timeout", def.Timeout,
		"Kueue's waitForPodsReady.timeout: an admitted workload whose pods are not all ready by then is evicted (Evicted, PodsReadyTimeout) and requeued; 0 turns waitForPodsReady off (Kueue's default is 5m)")
	fl.DurationVar(&k.backoffBase, "kueue-requeue-backoff-base", def.BackoffBase,
		"Kueue's waitForPodsReady.requeuingStrategy.backoffBaseSeconds: the n-th requeue after a PodsReadyTimeout waits base·2^(n-1) (Kueue's default is 60s)")
	fl.DurationVar(&k.backoffMax, "kueue-requeue-backoff-max", def.BackoffMax,
		"Kueue's waitForPodsReady.requeuingStrategy.backoffMaxSeconds: the longest wait before a requeue")
	fl.Int32Var(&k.backoffLimit, "kueue-requeue-backoff-limit", def.BackoffLimitCount,
		"Kueue's waitForPodsReady.requeuingStrategy.backoffLimitCount: requeues after which the workload is deactivated; 0 requeues forever (Kueue's default)")
}

// config is the queue manager's configuration of the flags; nil (the
// server's default) when they were not registered.
func (k *kueueFlags) config() *kueue.Config {
	if !k.registered {
		return nil
	}
	cfg := kueue.DefaultConfig()
	w := &cfg.WaitForPodsReady
	w.Enable = k.timeout != 0
	w.Timeout, w.BackoffBase, w.BackoffMax, w.BackoffLimitCount = k.timeout, k.backoffBase, k.backoffMax, k.backoffLimit
	return &cfg
}

// validate reports every bad value at once, in the queue manager's words
// (Kueue's field paths) with the flag that set it.
func (k *kueueFlags) validate() error {
	cfg := k.config()
	if cfg == nil {
		return nil
	}
	if k.timeout < 0 {
		return fmt.Errorf("--kueue-pods-ready-timeout %s: must not be negative (0 turns waitForPodsReady off)", k.timeout)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("--kueue-* flags: %w", err)
	}
	return nil
}
