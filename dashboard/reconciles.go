package dashboard

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// MaxReconciles bounds the reconcile records kept: minutes of a busy lab,
// a few hundred KiB.
const MaxReconciles = 1000

// Reconcile is one reconcile line of a controller, as logReconcile writes
// it (controlplane/controllers): what the loop observed, what it wants,
// what it did.
type Reconcile struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Controller string    `json:"controller"`
	Key        string    `json:"key"`
	Observed   string    `json:"observed"`
	Desired    string    `json:"desired"`
	Action     string    `json:"action"`
	// Acted: the reconcile changed something (logged at Info; a no-op
	// reconcile is logged at Debug).
	Acted bool `json:"acted"`
}

// Reconciles is a bounded ring of Reconcile records with change
// notification. Safe for concurrent use.
type Reconciles struct {
	mu      sync.Mutex
	max     int
	seq     int64
	recs    []Reconcile
	changed chan struct{} // closed and replaced on every Add
}

// NewReconciles keeps at most max records (MaxReconciles when max <= 0).
func NewReconciles(max int) *Reconciles {
	if max <= 0 {
		max = MaxReconciles
	}
	return &Reconciles{max: max, changed: make(chan struct{})}
}

// Add records r (its Seq is set).
func (rs *Reconciles) Add(r Reconcile) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.seq++
	r.Seq = rs.seq
	rs.recs = append(rs.recs, r)
	// Drop the oldest only once twice max are kept, so a busy cluster
	// copies max records once per max reconciles, not on every one.
	if len(rs.recs) >= 2*rs.max {
		rs.recs = slices.Clone(rs.recs[len(rs.recs)-rs.max:])
	}
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Since returns the records after seq, and a channel closed at the next Add.
func (rs *Reconciles) Since(seq int64) ([]Reconcile, <-chan struct{}) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	recs := rs.recs[max(0, len(rs.recs)-rs.max):] // the newest max
	i, _ := slices.BinarySearchFunc(recs, seq+1, func(r Reconcile, s int64) int {
		switch {
		case r.Seq < s:
			return -1
		case r.Seq > s:
			return 1
		}
		return 0
	})
	return slices.Clone(recs[i:]), rs.changed
}

// TeeReconciles returns a handler that passes every record to next (when
// next is enabled for its level) and adds each "reconcile" record, at any
// level, to rs. The controllers' logger is built on it, so the dashboard
// sees the no-op reconciles that next (at Info) drops.
func TeeReconciles(next slog.Handler, rs *Reconciles) slog.Handler {
	return &teeHandler{next: next, rs: rs}
}

type teeHandler struct {
	next  slog.Handler
	rs    *Reconciles
	attrs []slog.Attr // from WithAttrs: the controller's name
}

func (h *teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.next.Enabled(ctx, l)
}

func (h *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reconcile" {
		rec := Reconcile{Time: r.Time, Acted: r.Level >= slog.LevelInfo}
		set := func(a slog.Attr) bool {
			v := a.Value.String()
			switch a.Key {
			case "controller":
				rec.Controller = v
			case "key":
				rec.Key = v
			case "observed":
				rec.Observed = v
			case "desired":
				rec.Desired = v
			case "action":
				rec.Action = v
			}
			return true
		}
		for _, a := range h.attrs {
			set(a)
		}
		r.Attrs(set)
		h.rs.Add(rec)
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &teeHandler{next: h.next.WithAttrs(as), rs: h.rs, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{next: h.next.WithGroup(name), rs: h.rs, attrs: h.attrs}
}
