package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

var (
	podKind     = api.MustKindOf(&api.Pod{})
	serviceKind = api.MustKindOf(&api.Service{})
	jobKind     = api.MustKindOf(&api.Job{})
	t0          = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
)

func rl(kv ...string) api.ResourceList {
	out := api.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resource.MustParse(kv[i+1])
	}
	return out
}

// quotaOf is a quota as the controller leaves it: status.hard = spec.hard.
func quotaOf(name string, hard, used api.ResourceList) *api.ResourceQuota {
	q := &api.ResourceQuota{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "bob"}}
	q.Spec.Hard, q.Status.Hard, q.Status.Used = hard, hard, used
	return q
}

func gpuPod(name string, gpus string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "bob", UID: "uid-" + name, Generation: 1}}
	p.Spec.Containers = []api.Container{{Name: "cuda", Image: "cuda", Resources: api.ResourceRequirements{
		Limits: rl("nvidia.com/gpu", gpus), Requests: rl("nvidia.com/gpu", gpus)}}}
	return p
}

// Bob's second GPU pod, in Kubernetes' words; the first is charged.
func TestCheckGPUQuota(t *testing.T) {
	q := quotaOf("gpus", rl("requests.nvidia.com/gpu", "1", "pods", "10"), rl("requests.nvidia.com/gpu", "0", "pods", "0"))
	deltas, err := Check([]*api.ResourceQuota{q}, Request{Kind: podKind, Obj: gpuPod("first", "1"), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if want := rl("requests.nvidia.com/gpu", "1", "pods", "1"); !Equal(deltas[0], want) {
		t.Fatalf("charge %v, want %v", deltas[0], want)
	}
	charged := api.Clone(q)
	Charge(charged, "pods", "uid-first", 1, deltas[0], t0)
	_, err = Check([]*api.ResourceQuota{charged}, Request{Kind: podKind, Obj: gpuPod("second", "1"), Now: t0})
	want := "exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1"
	if err == nil || err.Error() != want || !errors.Is(err, ErrForbidden) {
		t.Fatalf("second GPU pod: %v, want %s", err, want)
	}
	// A CPU pod still fits: only what it uses is checked.
	cpu := gpuPod("cpu", "1")
	cpu.Spec.Containers[0].Resources = api.ResourceRequirements{}
	if _, err := Check([]*api.ResourceQuota{charged}, Request{Kind: podKind, Obj: cpu, Now: t0}); err != nil {
		t.Errorf("a pod without GPUs: %v", err)
	}
}

func TestCheckRefusals(t *testing.T) {
	compute := quotaOf("compute", rl("limits.cpu", "2", "requests.memory", "1Gi"), rl("limits.cpu", "0", "requests.memory", "0"))
	p := gpuPod("web", "1")
	p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: "sidecar", Resources: api.ResourceRequirements{Limits: rl("cpu", "1")}})
	_, err := Check([]*api.ResourceQuota{compute}, Request{Kind: podKind, Obj: p, Now: t0})
	if want := "failed quota: compute: must specify limits.cpu for: cuda; requests.memory for: cuda,sidecar"; err == nil || err.Error() != want {
		t.Errorf("constraints: %v, want %s", err, want)
	}
	unknown := quotaOf("new", rl("pods", "1"), nil)
	_, err = Check([]*api.ResourceQuota{unknown}, Request{Kind: podKind, Obj: gpuPod("p", "1"), Now: t0})
	if want := "status unknown for quota: new, resources: pods"; err == nil || err.Error() != want {
		t.Errorf("no usage yet: %v, want %s", err, want)
	}
	jobs := quotaOf("jobs", rl("count/jobs.batch", "1"), rl("count/jobs.batch", "1"))
	_, err = Check([]*api.ResourceQuota{jobs}, Request{Kind: jobKind, Obj: &api.Job{ObjectMeta: api.ObjectMeta{Name: "j"}}, Now: t0})
	if want := "exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1"; err == nil || err.Error() != want {
		t.Errorf("count/jobs.batch: %v, want %s", err, want)
	}
	// A quota on something else: not charged.
	if d, err := Check([]*api.ResourceQuota{jobs}, Request{Kind: podKind, Obj: gpuPod("p", "1"), Now: t0}); err != nil || len(d) != 0 {
		t.Errorf("pod against a jobs quota: %v %v", d, err)
	}
}

func TestUsage(t *testing.T) {
	p := &api.Pod{}
	p.Spec.Containers = []api.Container{
		{Name: "a", Resources: api.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "64Mi"), Limits: rl("cpu", "500m", "memory", "128Mi")}},
		{Name: "b", Resources: api.ResourceRequirements{Requests: rl("cpu", "250m", "nvidia.com/gpu", "2"), Limits: rl("nvidia.com/gpu", "2")}},
	}
	p.Spec.InitContainers = []api.Container{{Name: "init", Resources: api.ResourceRequirements{Requests: rl("cpu", "2")}}}
	want := rl("count/pods", "1", "pods", "1", "cpu", "2", "requests.cpu", "2", "memory", "64Mi", "requests.memory", "64Mi",
		"limits.cpu", "500m", "limits.memory", "128Mi", "requests.nvidia.com/gpu", "2")
	if got := Usage(podKind, p, t0); !Equal(got, want) {
		t.Errorf("pod usage\n%v\nwant\n%v", got, want)
	}
	p.Status.Phase = api.PodSucceeded
	if got := Usage(podKind, p, t0); !Equal(got, rl("count/pods", "1")) {
		t.Errorf("ended pod: %v, want count/pods only", got)
	}
	s := &api.Service{}
	s.Spec.Type = api.ServiceTypeNodePort
	s.Spec.Ports = []api.ServicePort{{Port: 80}, {Port: 443}}
	if got := Usage(serviceKind, s, t0); !Equal(got, rl("count/services", "1", "services", "1", "services.nodeports", "2", "services.loadbalancers", "0")) {
		t.Errorf("NodePort service: %v", got)
	}
}

func TestScopes(t *testing.T) {
	be := quotaOf("be", rl("pods", "1"), rl("pods", "0"))
	be.Spec.Scopes = []string{api.ResourceQuotaScopeBestEffort}
	high := quotaOf("high", rl("pods", "1"), rl("pods", "0"))
	high.Spec.ScopeSelector = &api.ScopeSelector{MatchExpressions: []api.ScopedResourceSelectorRequirement{{ScopeName: api.ResourceQuotaScopePriorityClass, Operator: api.ScopeSelectorOpIn, Values: []string{"high"}}}}
	plain := gpuPod("plain", "1")
	plain.Spec.Containers[0].Resources = api.ResourceRequirements{}
	prio := api.Clone(plain)
	prio.Spec.PriorityClassName = "high"
	cases := []struct {
		q    *api.ResourceQuota
		p    *api.Pod
		want bool
	}{{be, plain, true}, {be, gpuPod("g", "1"), true}, {high, plain, false}, {high, prio, true}}
	for _, c := range cases {
		if got := Matches(c.q, podKind, c.p); got != c.want {
			t.Errorf("quota %s, pod %s: matches %v, want %v", c.q.Name, c.p.Name, got, c.want)
		}
	}
	withCPU := gpuPod("c", "1")
	withCPU.Spec.Containers[0].Resources.Requests["cpu"] = resource.MustParse("100m")
	if Matches(be, podKind, withCPU) {
		t.Error("a pod with a cpu request matched BestEffort")
	}
}

// The controller counts objects and the reservations it does not see yet;
// it never drops a charge admission made for an object still on its way.
func TestCalculateKeepsInFlightCharges(t *testing.T) {
	q := quotaOf("gpus", rl("requests.nvidia.com/gpu", "2"), rl("requests.nvidia.com/gpu", "0"))
	Charge(q, "pods", "uid-a", 1, rl("requests.nvidia.com/gpu", "1"), t0)
	Charge(q, "pods", "uid-b", 1, rl("requests.nvidia.com/gpu", "1"), t0)
	// The controller's cache has a but not b yet.
	st, keep := Calculate(q, []Objects{{Kind: podKind, Items: []api.Object{gpuPod("a", "1")}}}, t0.Add(time.Second), nil)
	if used := st.Used["requests.nvidia.com/gpu"]; used.String() != "2" || len(keep) != 1 || keep[0].UID != "uid-b" {
		t.Fatalf("used %s, reservations %v; want 2 and b's kept", used.String(), keep)
	}
	// b never came: after the TTL its charge goes.
	st, keep = Calculate(q, []Objects{{Kind: podKind, Items: []api.Object{gpuPod("a", "1")}}}, t0.Add(ReservationTTL+time.Second), nil)
	if used := st.Used["requests.nvidia.com/gpu"]; used.String() != "1" || len(keep) != 0 {
		t.Fatalf("after the TTL: used %s, reservations %v", used.String(), keep)
	}
	// b was created, counted and deleted between two counts: its
	// reservation does not count it again.
	seen := func(res, uid string, gen int64) bool { return res == "pods" && uid == "uid-b" }
	st, keep = Calculate(q, []Objects{{Kind: podKind, Items: []api.Object{gpuPod("a", "1")}}}, t0.Add(time.Second), seen)
	if used := st.Used["requests.nvidia.com/gpu"]; used.String() != "1" || len(keep) != 0 {
		t.Fatalf("b seen before: used %s, reservations %v", used.String(), keep)
	}
	// A charge for a later generation of a (an update that asks for
	// more) holds until the count sees that generation; one for another
	// resource's object of the same uid is not a's.
	up := api.Clone(q)
	Charge(up, "pods", "uid-a", 2, rl("requests.nvidia.com/gpu", "1"), t0)
	Charge(up, "jobs.batch", "uid-a", 1, rl("requests.nvidia.com/gpu", "0"), t0)
	a2 := gpuPod("a", "1")
	a2.Generation = 2
	for _, c := range []struct {
		a    *api.Pod
		keep int // of a's update and the job's
	}{{gpuPod("a", "1"), 2}, {a2, 1}} {
		_, keep = Calculate(up, []Objects{{Kind: podKind, Items: []api.Object{c.a}}}, t0.Add(time.Second), nil)
		var kept []string
		for _, r := range keep {
			if r.UID == "uid-a" {
				kept = append(kept, fmt.Sprintf("%s@%d", r.Resource, r.Generation))
			}
		}
		if len(kept) != c.keep {
			t.Errorf("a counted at generation %d: kept %v of its uid's charges, want %d", c.a.Generation, kept, c.keep)
		}
	}
	// Release takes a charge back at once.
	r := api.Clone(q)
	before := r.Status.Used["requests.nvidia.com/gpu"]
	released := Release(r, "pods", "uid-b")
	after := r.Status.Used["requests.nvidia.com/gpu"]
	if !released || before.String() != "2" || after.String() != "1" || len(Reservations(r)) != 1 {
		t.Errorf("release: used %v, reservations %v", r.Status.Used, Reservations(r))
	}
}

func TestLimitRange(t *testing.T) {
	lr := &api.LimitRange{ObjectMeta: api.ObjectMeta{Name: "limits"}, Spec: api.LimitRangeSpec{Limits: []api.LimitRangeItem{
		{Type: api.LimitTypeContainer, Default: rl("memory", "512Mi"), DefaultRequest: rl("memory", "256Mi"), Max: rl("cpu", "800m"), Min: rl("cpu", "200m")},
		{Type: api.LimitTypePod, MaxLimitRequestRatio: rl("cpu", "2")},
	}}}
	api.SetDefaults(lr)
	p := gpuPod("web", "1")
	p.Spec.Containers[0].Resources = api.ResourceRequirements{}
	ApplyDefaults(p, []*api.LimitRange{lr})
	c := p.Spec.Containers[0].Resources
	// Kubernetes' LimitRange defaulting: the default limit comes from max,
	// the default request from the default limit (before min).
	if !Equal(c.Limits, rl("memory", "512Mi", "cpu", "800m")) || !Equal(c.Requests, rl("memory", "256Mi", "cpu", "800m")) {
		t.Fatalf("defaults: %+v", c)
	}
	if want := "LimitRanger plugin set: cpu, memory request for container cuda; cpu, memory limit for container cuda"; p.Annotations[api.AnnotationLimitRanger] != want {
		t.Errorf("annotation %q, want %q", p.Annotations[api.AnnotationLimitRanger], want)
	}
	if err := ValidatePod(p, []*api.LimitRange{lr}); err != nil {
		t.Errorf("the defaulted pod: %v", err)
	}
	big := gpuPod("big", "1")
	big.Spec.Containers[0].Resources = api.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "1")}
	err := ValidatePod(big, []*api.LimitRange{lr})
	if want := "[minimum cpu usage per Container is 200m, but request is 100m, maximum cpu usage per Container is 800m, but limit is 1, cpu max limit to request ratio per Pod is 2, but provided ratio is 10.000000]"; err == nil || err.Error() != want {
		t.Errorf("bounds: %v\nwant %s", err, want)
	}
}

// Sums past int64 do not wrap: a usage near the largest int64 plus
// another is still over a hard limit of the largest int64, and Add keeps
// the exact sum.
func TestCheckSumsNeverOverflow(t *testing.T) {
	const max = "9223372036854775807"
	q := quotaOf("big", rl("requests.memory", max), rl("requests.memory", max))
	p := gpuPod("mem", "0")
	p.Spec.Containers[0].Resources = api.ResourceRequirements{Requests: rl("memory", max), Limits: rl("memory", max)}
	_, err := Check([]*api.ResourceQuota{q}, Request{Kind: podKind, Obj: p, Now: t0})
	want := "exceeded quota: big, requested: requests.memory=" + max + ", used: requests.memory=" + max + ", limited: requests.memory=" + max
	if err == nil || err.Error() != want {
		t.Fatalf("over int64: %v, want %s", err, want)
	}
	sum := Add(rl("cpu", max), rl("cpu", max))["cpu"]
	if sum.Sign() <= 0 || sum.Cmp(resource.MustParse(max)) <= 0 || sum.String() != "18446744073709551614" {
		t.Errorf("sum of two int64 maxima: %s", sum.String())
	}
}

// The ledger (admission's batch: the annotation read once, written once)
// leaves a quota exactly as the requests one at a time through the
// annotation's JSON did: the same status.used and, byte for byte, the
// same annotation, through charges, releases (of charged and unknown
// objects), settlements and reservations expiring on the way; and so do
// the functions Charge, Release and Settle, and ledgers one batch after
// another, each going on from the last one's reservations in memory
// (NewLedgerWith: admission's next batch over the quota it wrote).
func TestLedgerIsTheAnnotationRoundTrip(t *testing.T) {
	// The reference: each step reads and writes the annotation.
	refCharge := func(q *api.ResourceQuota, res, uid string, gen int64, delta api.ResourceList, now time.Time) {
		q.Status.Used = Add(q.Status.Used, delta)
		rs := fresh(Reservations(q), now)
		setReservations(q, append(rs, Reservation{Resource: res, UID: uid, Generation: gen, At: api.NewTime(now), Usage: delta}))
	}
	refRelease := func(q *api.ResourceQuota, res, uid string) bool {
		rs := Reservations(q)
		for i, r := range rs {
			if r.Resource == res && r.UID == uid {
				q.Status.Used = SubtractNonNegative(q.Status.Used, r.Usage)
				setReservations(q, append(rs[:i:i], rs[i+1:]...))
				return true
			}
		}
		return false
	}
	refSettle := func(q *api.ResourceQuota, stored map[string]bool) bool {
		var keep []Reservation
		rs := Reservations(q)
		for _, r := range rs {
			if !stored[r.Resource+"/"+r.UID] {
				keep = append(keep, r)
			}
		}
		if len(keep) == len(rs) {
			return false
		}
		setReservations(q, keep)
		return true
	}
	start := quotaOf("q", rl("pods", "100", "requests.cpu", "10"), rl("pods", "2", "requests.cpu", "1500m"))
	// Two charges already in the annotation: one a minute and a half old.
	Charge(start, "pods", "old", 1, rl("pods", "1", "requests.cpu", "500m"), t0.Add(-90*time.Second))
	Charge(start, "pods", "recent", 1, rl("pods", "1", "requests.cpu", "1"), t0.Add(-30*time.Second))

	type step struct {
		op     string // charge, release, settle
		uid    string
		at     time.Duration // after t0, sub-second parts included
		stored []string
	}
	steps := []step{
		{op: "charge", uid: "a", at: 150 * time.Millisecond},
		{op: "charge", uid: "b", at: 900 * time.Millisecond},
		{op: "release", uid: "a"},
		{op: "release", uid: "nobody"},
		{op: "charge", uid: "c", at: 20*time.Second + 400*time.Millisecond},
		{op: "settle", stored: []string{"pods/c", "pods/unknown"}},
		// The "recent" one from before expires here (30 s + 31 s > 1 min).
		{op: "charge", uid: "d", at: 31*time.Second + 999*time.Millisecond},
		{op: "release", uid: "recent"},
		{op: "settle", stored: []string{"pods/nothing"}},
		{op: "charge", uid: "e", at: 59*time.Second + 500*time.Millisecond},
		{op: "release", uid: "c"}, // settled: nothing to take back
		// b (charged at 0.9 s, kept as 0 s) is over a minute old at 60.5 s.
		{op: "charge", uid: "g", at: 60*time.Second + 500*time.Millisecond},
	}
	ref, viaLedger, viaFuncs, viaBatches := api.Clone(start), api.Clone(start), api.Clone(start), api.Clone(start)
	l := NewLedger(viaLedger)
	batch := NewLedger(viaBatches)
	for i, s := range steps {
		if i%3 == 2 { // a new batch: the last one's write, then a ledger from its reservations
			batch.Flush()
			batch = NewLedgerWith(viaBatches, batch.Reservations())
		}
		delta := rl("pods", "1", "requests.cpu", fmt.Sprintf("%dm", 100*(i+1)))
		var want, got, gotFn bool
		switch s.op {
		case "charge":
			now := t0.Add(s.at)
			refCharge(ref, "pods", s.uid, 1, delta, now)
			l.Charge("pods", s.uid, 1, delta, now)
			batch.Charge("pods", s.uid, 1, delta, now)
			Charge(viaFuncs, "pods", s.uid, 1, delta, now)
			want, got, gotFn = true, true, true
		case "release":
			want, got, gotFn = refRelease(ref, "pods", s.uid), l.Release("pods", s.uid), Release(viaFuncs, "pods", s.uid)
			if b := batch.Release("pods", s.uid); b != want {
				t.Errorf("step %d (release %s): the batches' ledger says changed=%v; the round trip %v", i, s.uid, b, want)
			}
		case "settle":
			stored := map[string]bool{}
			for _, k := range s.stored {
				stored[k] = true
			}
			want, got, gotFn = refSettle(ref, stored), l.Settle(stored), Settle(viaFuncs, stored)
			if b := batch.Settle(stored); b != want {
				t.Errorf("step %d (settle): the batches' ledger says changed=%v; the round trip %v", i, b, want)
			}
		}
		if got != want || gotFn != want {
			t.Errorf("step %d (%s %s): ledger says changed=%v, functions %v; the round trip %v", i, s.op, s.uid, got, gotFn, want)
		}
	}
	l.Flush()
	batch.Flush()
	refUsed, _ := json.Marshal(ref.Status.Used)
	for name, q := range map[string]*api.ResourceQuota{"ledger": viaLedger, "functions": viaFuncs, "batches": viaBatches} {
		if used, _ := json.Marshal(q.Status.Used); string(used) != string(refUsed) {
			t.Errorf("%s: used %s; the round trip %s", name, used, refUsed)
		}
		if got, want := q.Annotations[ReservationsAnnotation], ref.Annotations[ReservationsAnnotation]; got != want {
			t.Errorf("%s: reservations\n%s\nthe round trip\n%s", name, got, want)
		}
	}
	if n := len(Reservations(ref)); n != 3 { // d, e and g; the rest released, settled or expired
		t.Errorf("the round trip keeps %d reservations, want 3: %s", n, ref.Annotations[ReservationsAnnotation])
	}
}

// Calculate sums in place; the sum is what adding list by list gives.
func TestCalculateSumsAsAdd(t *testing.T) {
	q := quotaOf("q", rl("pods", "100", "requests.cpu", "100", "requests.memory", "1Ti", "requests.nvidia.com/gpu", "8"), nil)
	var pods []api.Object
	want := api.ResourceList{}
	for i := range 7 {
		p := gpuPod(fmt.Sprintf("p%d", i), fmt.Sprint(i%2))
		p.Spec.Containers[0].Resources.Requests["cpu"] = resource.MustParse(fmt.Sprintf("%dm", 333*(i+1)))
		p.Spec.Containers[0].Resources.Requests["memory"] = resource.MustParse(fmt.Sprintf("%dMi", 100+i))
		pods = append(pods, p)
		want = Add(want, Mask(Usage(podKind, p, t0), Names(q.Spec.Hard)))
	}
	st, _ := Calculate(q, []Objects{{Kind: podKind, Items: pods}}, t0, nil)
	if !Equal(st.Used, want) || len(st.Used) != 4 {
		t.Errorf("used %s; want %s", PrettyPrint(st.Used), PrettyPrint(want))
	}
	if got := st.Used["requests.cpu"]; got.String() != "9324m" {
		t.Errorf("requests.cpu = %s; want 9324m", got.String())
	}
	// The pods' own lists are not changed by the sum.
	if got := pods[0].(*api.Pod).Spec.Containers[0].Resources.Requests["cpu"]; got.String() != "333m" {
		t.Errorf("pod p0's cpu request became %s", got.String())
	}
}

// The usage cache answers Usage; an object is computed again only when
// its resourceVersion changed; a pod being deleted always (its usage
// depends on the time); entries not asked for within a TTL go.
func TestUsageCache(t *testing.T) {
	var c UsageCache
	p := gpuPod("a", "1")
	p.ResourceVersion = "5"
	if got, want := c.Usage(podKind, p, t0), Usage(podKind, p, t0); !Equal(got, want) {
		t.Fatalf("usage %s; want %s", PrettyPrint(got), PrettyPrint(want))
	}
	// Same resourceVersion: the stored usage (the object cannot have
	// changed; here it did, to show the cache answered).
	same := api.Clone(p)
	same.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("4")
	if got := c.Usage(podKind, same, t0.Add(time.Second))["requests.nvidia.com/gpu"]; got.String() != "1" {
		t.Errorf("same resourceVersion: gpu %s; want the cached 1", got.String())
	}
	same.ResourceVersion = "6"
	if got := c.Usage(podKind, same, t0.Add(2*time.Second))["requests.nvidia.com/gpu"]; got.String() != "4" {
		t.Errorf("new resourceVersion: gpu %s; want 4", got.String())
	}
	// Deleting, its grace period over: counted only as an object, every time.
	del := api.Clone(same)
	ts, grace := api.NewTime(t0), int64(30)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &ts, &grace
	if got := c.Usage(podKind, del, t0.Add(10*time.Second)); !Equal(got, Usage(podKind, del, t0.Add(10*time.Second))) || len(got) < 3 {
		t.Errorf("deleting, in its grace period: %s", PrettyPrint(got))
	}
	if got := c.Usage(podKind, del, t0.Add(40*time.Second)); !Equal(got, Usage(podKind, del, t0.Add(40*time.Second))) || len(got) != 1 {
		t.Errorf("deleting, grace period over: %s; want only the object count", PrettyPrint(got))
	}
	// Another object asked after the TTL sweeps the old entry out.
	b := gpuPod("b", "0")
	b.ResourceVersion = "9"
	c.Usage(podKind, b, t0.Add(2*ReservationTTL))
	if _, ok := c.entries[ObjectID{Resource: "pods", UID: "uid-a"}]; ok || len(c.entries) != 1 {
		t.Errorf("entries after the TTL: %v; want only b's", len(c.entries))
	}
}

// A ledger adds a charge into its quota's status.used in place: the
// delta (kept in the reservation too) is never changed, and the sums are
// exact past int64.
func TestLedgerChargeLeavesTheDelta(t *testing.T) {
	const max = "9223372036854775807"
	q := quotaOf("big", rl("requests.memory", max, "pods", "10"), rl("pods", "1"))
	delta := rl("requests.memory", max, "pods", "1")
	l := NewLedger(q)
	l.Charge("pods", "u1", 1, delta, t0)
	l.Charge("pods", "u2", 1, delta, t0)
	l.Flush()
	if want := rl("requests.memory", max, "pods", "1"); !Equal(delta, want) {
		t.Fatalf("delta changed: %v", delta)
	}
	want := rl("requests.memory", "18446744073709551614", "pods", "3")
	if !Equal(q.Status.Used, want) {
		t.Fatalf("used = %s, want %s", PrettyPrint(q.Status.Used), PrettyPrint(want))
	}
	if rs := Reservations(q); len(rs) != 2 || !Equal(rs[0].Usage, delta) {
		t.Fatalf("reservations = %+v", rs)
	}
}
