package dashboard

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// MaxReconciles bounds the reconcile records kept per controller: minutes
// of a busy lab, a few hundred KiB each.
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

// Reconciles keeps the newest Reconcile records of each controller, with
// change notification. One ring per controller: the periodic no-op
// reconciles of one loop (the quota controller's recounts, the HPA's
// syncs every 15 s) never push another loop's records out. Safe for
// concurrent use.
type Reconciles struct {
	mu      sync.Mutex
	max     int
	seq     int64
	rings   map[string][]Reconcile // by controller, oldest first
	changed chan struct{}          // closed and replaced on every Add
}

// NewReconciles keeps at most max records per controller (MaxReconciles
// when max <= 0).
func NewReconciles(max int) *Reconciles {
	if max <= 0 {
		max = MaxReconciles
	}
	return &Reconciles{max: max, rings: map[string][]Reconcile{}, changed: make(chan struct{})}
}

// Add records r (its Seq is set).
func (rs *Reconciles) Add(r Reconcile) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.seq++
	r.Seq = rs.seq
	ring := append(rs.rings[r.Controller], r)
	// Drop the oldest only once twice max are kept, so a busy controller
	// copies max records once per max reconciles, not on every one.
	if len(ring) >= 2*rs.max {
		ring = slices.Clone(ring[len(ring)-rs.max:])
	}
	rs.rings[r.Controller] = ring
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Since returns the records after seq (the newest max of each
// controller), in order, and a channel closed at the next Add.
func (rs *Reconciles) Since(seq int64) ([]Reconcile, <-chan struct{}) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []Reconcile
	for _, ring := range rs.rings {
		recs := ring[max(0, len(ring)-rs.max):] // the newest max
		i, _ := slices.BinarySearchFunc(recs, seq+1, func(r Reconcile, s int64) int {
			switch {
			case r.Seq < s:
				return -1
			case r.Seq > s:
				return 1
			}
			return 0
		})
		out = append(out, recs[i:]...)
	}
	slices.SortFunc(out, func(a, b Reconcile) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, rs.changed
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
