package quota

import (
	"encoding/json"
	"slices"
	"time"

	"skiff.dev/skiff/api"
)

// ReservationsAnnotation holds, on a ResourceQuota, the charges admission
// made for objects being created that the controller has not counted yet
// (a JSON list of Reservation).
const ReservationsAnnotation = api.QuotaReservationsAnnotation

// ReservationTTL is how long a reservation counts without its object: a
// create takes milliseconds; one whose object never appeared failed.
const ReservationTTL = time.Minute

// Reservation is what admission charged one object.
type Reservation struct {
	// Resource is the object's resource ("pods", "jobs.batch"); UID its
	// uid; Generation the object's metadata.generation the charge is for
	// (1 for a create): the controller counts the object itself once it
	// sees that generation.
	Resource   string `json:"resource"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	// At is when it was charged.
	At api.Time `json:"at"`
	// Usage is what was added to status.used.
	Usage api.ResourceList `json:"usage"`
}

// Reservations reads q's reservations; a damaged annotation reads as none
// (the controller then counts from the objects alone).
func Reservations(q *api.ResourceQuota) []Reservation {
	v, ok := q.Annotations[ReservationsAnnotation]
	if !ok {
		return nil
	}
	var out []Reservation
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil
	}
	return out
}

// setReservations writes rs into q's annotation (removing it when empty).
func setReservations(q *api.ResourceQuota, rs []Reservation) {
	if len(rs) == 0 {
		delete(q.Annotations, ReservationsAnnotation)
		return
	}
	b, _ := json.Marshal(rs)
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	q.Annotations[ReservationsAnnotation] = string(b)
}

// Charge adds delta to q's status.used and records it as a reservation
// for generation gen of the object (resource, uid), dropping reservations
// older than ReservationTTL. q is changed: pass a copy.
func Charge(q *api.ResourceQuota, resource, uid string, gen int64, delta api.ResourceList, now time.Time) {
	l := NewLedger(q)
	l.Charge(resource, uid, gen, delta, now)
	l.Flush()
}

// Release takes back what Charge added for (resource, uid), when its
// reservation is still there (the controller may have counted the object
// already, which then holds the usage itself). It reports whether q
// changed. q is changed: pass a copy.
func Release(q *api.ResourceQuota, resource, uid string) bool {
	l := NewLedger(q)
	changed := l.Release(resource, uid)
	l.Flush()
	return changed
}

// Settle drops the reservations of objects whose writes are stored (by
// "resource/uid"): their usage is in status.used already, and the
// controller counts the objects themselves (it recounts from the API
// server, not its cache, before it lowers a usage). It reports whether q
// changed. q is changed: pass a copy.
func Settle(q *api.ResourceQuota, stored map[string]bool) bool {
	l := NewLedger(q)
	changed := l.Settle(stored)
	l.Flush()
	return changed
}

// A Ledger is one quota's reservations read once for a batch of charges,
// releases and settlements (admission's batch of a namespace's waiting
// requests): each changes the quota's status.used at once and the
// reservations in memory, and Flush writes them into the annotation once.
// The quota ends exactly as Charge, Release and Settle called one after
// the other leave it, without reading and writing the annotation's JSON
// for every request of the batch.
type Ledger struct {
	q     *api.ResourceQuota
	rs    []Reservation
	dirty bool // rs differs from the annotation
}

// NewLedger reads q's reservations. q is changed by the ledger: pass a copy.
func NewLedger(q *api.ResourceQuota) *Ledger { return &Ledger{q: q, rs: Reservations(q)} }

// NewLedgerWith is NewLedger of a quota whose annotation holds rs, as the
// ledger that wrote it left them (Ledger.Reservations after Flush): its
// JSON is not read again. Admission's next batch, finding the quota as its
// last batch wrote it, goes on from there. The ledger owns rs.
func NewLedgerWith(q *api.ResourceQuota, rs []Reservation) *Ledger {
	return &Ledger{q: q, rs: rs}
}

// Reservations returns a copy of the ledger's reservations: after Flush,
// what the quota's annotation holds.
func (l *Ledger) Reservations() []Reservation { return slices.Clone(l.rs) }

// Charge is the function Charge on the ledger's quota.
func (l *Ledger) Charge(resource, uid string, gen int64, delta api.ResourceList, now time.Time) {
	if l.q.Status.Used == nil {
		l.q.Status.Used = make(api.ResourceList, len(delta))
	}
	for n, v := range delta { // in place: the ledger's quota is a copy
		addInto(l.q.Status.Used, n, v)
	}
	l.rs = fresh(l.rs, now)
	// At as the annotation keeps it (whole seconds), so that fresh judges
	// it as it would after a round trip through the annotation.
	at := api.NewTime(now.Truncate(time.Second))
	l.rs = append(l.rs, Reservation{Resource: resource, UID: uid, Generation: gen, At: at, Usage: delta})
	l.dirty = true
}

// Release is the function Release on the ledger's quota.
func (l *Ledger) Release(resource, uid string) bool {
	i := slices.IndexFunc(l.rs, func(r Reservation) bool { return r.Resource == resource && r.UID == uid })
	if i < 0 {
		return false
	}
	l.q.Status.Used = SubtractNonNegative(l.q.Status.Used, l.rs[i].Usage)
	l.rs = slices.Delete(l.rs, i, i+1)
	l.dirty = true
	return true
}

// Settle is the function Settle on the ledger's quota.
func (l *Ledger) Settle(stored map[string]bool) bool {
	n := len(l.rs)
	l.rs = slices.DeleteFunc(l.rs, func(r Reservation) bool { return stored[r.Resource+"/"+r.UID] })
	if len(l.rs) == n {
		return false
	}
	l.dirty = true
	return true
}

// Flush writes the reservations into the quota's annotation (removing it
// when there are none) when anything changed them.
func (l *Ledger) Flush() {
	if l.dirty {
		setReservations(l.q, l.rs)
		l.dirty = false
	}
}

// Lower reports whether a calculated usage is below the stored one for
// some resource: the controller then counts again from the API server
// (its cache may not have an object admission charged and settled yet).
func Lower(stored, calculated api.ResourceList) bool {
	for k, v := range stored {
		if c, ok := calculated[k]; ok && c.Cmp(v) < 0 {
			return true
		}
	}
	return false
}

// fresh drops the reservations older than ReservationTTL.
func fresh(rs []Reservation, now time.Time) []Reservation {
	return slices.DeleteFunc(rs, func(r Reservation) bool { return now.Sub(r.At.Time) > ReservationTTL })
}

// Objects are the objects of one kind in a quota's namespace, as the
// controller sees them.
type Objects struct {
	Kind  *api.Kind
	Items []api.Object
	// Usage, when set, is Usage(Kind, obj, now) (a counter that keeps
	// each object's usage between counts); nil computes it.
	Usage func(obj api.Object, now time.Time) api.ResourceList
}

// Seen tells whether the counter has seen generation gen (or a later one)
// of the object resource/uid, now or before (an object seen and then
// deleted was counted while it lived and must not be counted again from
// its reservation).
type Seen func(resource, uid string, gen int64) bool

// ObjectID names one object of a count: its resource ("pods",
// "jobs.batch") and uid. Counts key their maps by it, not by
// "resource/uid": a count visits every object of the namespace, and a
// joined string is an allocation per object per count.
type ObjectID struct{ Resource, UID string }

// Calculate is the controller's count for q: status.hard from spec.hard,
// status.used the usage of the objects that match q, plus the
// reservations whose objects are not among them, were not seen before
// (seen, may be nil) and are younger than ReservationTTL, for every hard
// resource (0 when nothing uses it). It returns the new status and the
// reservations to keep; objs must hold every kind a hard resource of q
// covers.
func Calculate(q *api.ResourceQuota, objs []Objects, now time.Time, seenBefore Seen) (api.ResourceQuotaStatus, []Reservation) {
	names := Names(q.Spec.Hard)
	used := api.ResourceList{}
	// The generations counted of the objects that q holds reservations
	// for (a few, against every object of the namespace).
	reserved := fresh(Reservations(q), now)
	seen := make(map[ObjectID]int64, len(reserved))
	for _, r := range reserved {
		seen[ObjectID{Resource: r.Resource, UID: r.UID}] = -1 // not counted
	}
	for _, o := range objs {
		if !coversAny(o.Kind, names) {
			continue
		}
		for _, obj := range o.Items {
			m := obj.GetObjectMeta()
			if len(reserved) > 0 {
				id := ObjectID{Resource: o.Kind.GroupResource(), UID: m.UID}
				if gen, ok := seen[id]; ok && m.Generation > gen {
					seen[id] = m.Generation
				}
			}
			if matchesScopes(q, o.Kind, obj) {
				var u api.ResourceList
				if o.Usage != nil {
					u = o.Usage(obj, now)
				} else {
					u = Usage(o.Kind, obj, now)
				}
				addMasked(used, u, names)
			}
		}
	}
	var keep []Reservation
	for _, r := range reserved {
		if gen := seen[ObjectID{Resource: r.Resource, UID: r.UID}]; gen >= 0 && gen >= r.Generation {
			continue // the object counts for itself now
		}
		if seenBefore != nil && seenBefore(r.Resource, r.UID, r.Generation) {
			continue // counted while it lived; gone now
		}
		keep = append(keep, r)
		addMasked(used, r.Usage, names)
	}
	for _, n := range names {
		if _, ok := used[n]; !ok {
			hard := q.Spec.Hard[n]
			z := hard.DeepCopy()
			z.Set(0)
			used[n] = z
		}
	}
	hard := api.ResourceList{}
	for k, v := range q.Spec.Hard {
		hard[k] = v.DeepCopy()
	}
	return api.ResourceQuotaStatus{Hard: hard, Used: used}, keep
}

// PruneAt is how many settled reservations (their objects counted, or
// expired) a quota may carry before the controller writes only to drop
// them: each is a few hundred bytes every admission write carries.
const PruneAt = 32

// Apply writes a calculated status and reservations into q (a copy) and
// reports whether it is worth a write: the usage or the hard limits
// changed, or PruneAt reservations are settled. A write that only drops
// settled reservations would change nothing admission reads, and would
// only race with it.
func Apply(q *api.ResourceQuota, st api.ResourceQuotaStatus, keep []Reservation) bool {
	changed := !Equal(q.Status.Hard, st.Hard) || !Equal(q.Status.Used, st.Used) || len(Reservations(q))-len(keep) >= PruneAt
	q.Status = st
	setReservations(q, keep)
	return changed
}

func coversAny(k *api.Kind, names []string) bool {
	for _, n := range names {
		if Covers(k, n) {
			return true
		}
	}
	return false
}

// matchesScopes reports whether obj is in every scope of q.
func matchesScopes(q *api.ResourceQuota, k *api.Kind, obj api.Object) bool {
	for _, sel := range Selectors(q) {
		if !scopeMatches(sel, k, obj) {
			return false
		}
	}
	return true
}

// KindsFor are the kinds whose objects a quota with these hard resources
// counts, from kinds.
func KindsFor(hard api.ResourceList, kinds []*api.Kind) []*api.Kind {
	var out []*api.Kind
	names := Names(hard)
	for _, k := range kinds {
		if k.Namespaced && !k.Internal && coversAny(k, names) {
			out = append(out, k)
		}
	}
	return out
}
