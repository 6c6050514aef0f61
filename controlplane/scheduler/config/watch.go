package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long Watch lets a file rest after its last change before
// reading it: editors write a file in several steps (truncate, write,
// rename), and the half-written file must not be read as a change.
const settle = 100 * time.Millisecond

// Watch calls apply with the configuration at path each time the file
// changes to something new, until ctx ends. A change that does not
// parse, or that apply refuses (it returns an error: the scheduler could
// not build its profiles), is logged at Error with the reason and
// otherwise ignored: whatever runs keeps its configuration, and the next
// change is read again. A file that is removed is waited for. apply is
// called on Watch's goroutine, never twice at once.
//
// It watches path's directory, not the file, so the editors' "write a
// new file, rename it over the old one" is seen too. It returns an error
// only when it cannot watch at all.
func Watch(ctx context.Context, path string, log *slog.Logger, apply func(*Config) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch scheduler config: %w", err)
	}
	defer w.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch scheduler config: %w", err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("watch scheduler config %s: %w", path, err)
	}
	last, _ := os.ReadFile(abs) // what runs now: no change yet
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("watching the scheduler config", "file", path, "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == abs {
				timer.Reset(settle)
			}
		case <-timer.C:
			data, err := os.ReadFile(abs)
			if err != nil || bytes.Equal(data, last) {
				continue // removed (a new one is coming) or unchanged
			}
			last = data
			cfg, err := Parse(data)
			if err == nil {
				err = apply(cfg)
			}
			if err != nil {
				log.Error("scheduler config change refused; the scheduler keeps its configuration", "file", path, "err", err)
				continue
			}
			log.Info("scheduler config applied", "file", path, "profiles", len(cfg.Profiles))
		}
	}
}
