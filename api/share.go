package api

import (
	"bytes"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// Read-only objects share what they hold the same
//
// The store gives the informers of a process one copy of each object
// (controlplane/store/commit.go, liveCopy), and nobody changes it. Pods
// hold much that is the same from pod to pod: with 20,000 pods that was
// about a fifth of the server's live heap (docs/performance.md,
// eighteenth sitting). ShareReadOnly points those parts of such a copy at
// one copy for all: parts every pod may hold (the API access volume's
// source, an empty securityContext) at a value of this package's, the
// labels and owner references a controller gives all its pods at the
// last ones seen from the same controller, conditions and managedFields
// at the last equal ones seen, the small pointers defaulting gives every
// pod (grace period, priority, preemption policy, service links, a
// container's started) at one of each value, and start times at the last
// equal ones seen.

// apiAccessProjection is APIAccessVolume's projected source, and
// emptyPodSecurityContext a pod's "securityContext: {}", shared by the
// read-only pods ShareReadOnly gives them to; never modified.
var (
	apiAccessProjection     = APIAccessVolume("").Projected
	emptyPodSecurityContext = &PodSecurityContext{}
)

// ShareReadOnly lets obj, an object nobody modifies after this call,
// share with others what all of them hold the same: for a pod, the API
// access volume's source (APIAccessVolume's, field for field: about 500
// bytes in 13 allocations), an empty securityContext (112 bytes), the
// labels and owner references its controller's last pod had (about 440
// bytes) when they are equal, conditions equal to the last ones seen
// (448 bytes, for pods that changed in the same second), managedFields
// equal to the last ones seen (about 700 bytes, for pods one manager
// created from one template in the same second), the small
// pointers defaulting gives it, and a start time and running states
// equal to the last ones seen (shareSmall: an allocation each).
// An object anyone may still change must not be given to it: a change to
// a shared part would change every pod's.
func ShareReadOnly(obj Object) {
	pod, ok := obj.(*Pod)
	if !ok {
		return
	}
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Projected != nil && isAPIAccessProjection(v.Projected) {
			v.Projected = apiAccessProjection
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && reflect.ValueOf(sc).Elem().IsZero() {
		pod.Spec.SecurityContext = emptyPodSecurityContext
	}
	byController.share(pod)
	byConditions.share(&pod.Status.Conditions)
	byManagedFields.share(&pod.ManagedFields)
	shareSmall(pod)
}

// The values of the small pointers most pods hold (SetDefaults' and a
// started container's), one of each for all read-only pods; never
// modified.
var (
	sharedGracePeriod       = ptr[int64](DefaultTerminationGracePeriod)
	sharedZeroPriority      = ptr[int32](0)
	sharedPreemptLower      = ptr(PreemptLowerPriority)
	sharedTrue, sharedFalse = ptr(true), ptr(false)
)

// sharePtr points *p at shared when both hold the same value.
func sharePtr[T comparable](p **T, shared *T) {
	if *p != nil && **p == *shared {
		*p = shared
	}
}

// shareBool points *p at sharedTrue or sharedFalse.
func shareBool(p **bool) {
	sharePtr(p, sharedTrue)
	sharePtr(p, sharedFalse)
}

// shareSmall points pod's small pointers at the shared ones of the same
// value (8 to 16 bytes each, but one allocation each for every pod), and
// its start time and its containers' running states at the last equal
// ones seen: the pods started in one second hold the same.
func shareSmall(pod *Pod) {
	s, st := &pod.Spec, &pod.Status
	sharePtr(&s.TerminationGracePeriodSeconds, sharedGracePeriod)
	sharePtr(&s.Priority, sharedZeroPriority)
	sharePtr(&s.PreemptionPolicy, sharedPreemptLower)
	shareBool(&s.EnableServiceLinks)
	shareBool(&s.AutomountServiceAccountToken)
	startTimes.share(&st.StartTime)
	for _, list := range [][]ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			shareBool(&list[i].Started)
			runningStates.share(&list[i].State.Running)
		}
	}
}

// valueShares holds, by value, the last pointer seen to each of recent
// values: a Time of 24 bytes, or a running state holding one, allocated
// for every pod.
type valueShares[T comparable] struct {
	mu   sync.Mutex
	last map[T]*T
}

// maxValueShares bounds the values a valueShares remembers: past it, all
// are forgotten and the next pods start again.
const maxValueShares = 4096

var (
	startTimes    = valueShares[Time]{last: map[Time]*Time{}}
	runningStates = valueShares[ContainerStateRunning]{last: map[ContainerStateRunning]*ContainerStateRunning{}}
)

// share points *p at the last pointer seen to a value equal to **p
// (equal to the bit: compared with ==), else remembers *p.
func (c *valueShares[T]) share(p **T) {
	if *p == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.last[**p]; ok {
		*p = last
		return
	}
	if len(c.last) >= maxValueShares {
		clear(c.last)
	}
	c.last[**p] = *p
}

// listShares holds recent pods' lists of T (conditions, managedFields) by
// content: the pods a Deployment started in one second hold the same four
// conditions, times included (448 bytes a pod), and the pods one manager
// created from one template in one second the same managedFields (about
// 700 bytes).
type listShares[T any] struct {
	mu    sync.Mutex
	seed  maphash.Seed
	last  map[uint64][]T // the list's hash → the last list with it
	write func(*maphash.Hash, T)
	equal func(a, b T) bool
}

// maxListShares bounds the lists a listShares remembers: past it, all are
// forgotten and the next pods start again.
const maxListShares = 4096

func newListShares[T any](write func(*maphash.Hash, T), equal func(a, b T) bool) *listShares[T] {
	return &listShares[T]{seed: maphash.MakeSeed(), last: map[uint64][]T{}, write: write, equal: equal}
}

var (
	byConditions = newListShares(
		func(h *maphash.Hash, c PodCondition) { maphash.WriteComparable(h, c) },
		func(a, b PodCondition) bool { return a == b }) // to the bit
	byManagedFields = newListShares(writeManagedFieldsEntry, sameManagedFieldsEntry)
)

// share points *p at the last equal list seen, else remembers *p.
func (c *listShares[T]) share(p *[]T) {
	list := *p
	if len(list) == 0 {
		return
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	for _, v := range list {
		c.write(&h, v)
	}
	sum := h.Sum64()
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.last[sum]; ok && slices.EqualFunc(last, list, c.equal) {
		*p = last
		return
	}
	if len(c.last) >= maxListShares {
		clear(c.last)
	}
	c.last[sum] = list
}

// writeManagedFieldsEntry hashes what sameManagedFieldsEntry compares.
func writeManagedFieldsEntry(h *maphash.Hash, e ManagedFieldsEntry) {
	for _, s := range []string{e.Manager, e.Operation, e.APIVersion, e.FieldsType, e.Subresource} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	if e.Time != nil {
		maphash.WriteComparable(h, *e.Time)
	}
	h.Write(e.FieldsV1)
}

// sameManagedFieldsEntry compares two entries field by field, the time's
// value (to the bit) and the field set's bytes included.
func sameManagedFieldsEntry(a, b ManagedFieldsEntry) bool {
	return a.Manager == b.Manager && a.Operation == b.Operation && a.APIVersion == b.APIVersion &&
		a.FieldsType == b.FieldsType && a.Subresource == b.Subresource &&
		(a.Time == b.Time || a.Time != nil && b.Time != nil && *a.Time == *b.Time) &&
		bytes.Equal(a.FieldsV1, b.FieldsV1)
}

// controllerShares holds, for the controllers (by uid) whose pods
// ShareReadOnly saw last, the labels and owner references of the last of
// their pods: what a ReplicaSet's, a Job's or a DaemonSet's pods all hold.
type controllerShares struct {
	mu   sync.Mutex
	last map[string]metaShare // the controller owner reference's uid → its last pod's
}

type metaShare struct {
	labels map[string]string
	owners []OwnerReference
}

// maxControllerShares bounds the controllers remembered: past it, all are
// forgotten and the next pods start again (a few hundred bytes each).
const maxControllerShares = 4096

var byController = controllerShares{last: map[string]metaShare{}}

// share points pod's labels and owner references at its controller's
// last pod's when they are equal (and not empty), else remembers pod's as
// the last.
func (c *controllerShares) share(pod *Pod) {
	ref := ControllerOf(pod)
	if ref == nil || ref.UID == "" {
		return
	}
	m := &pod.ObjectMeta
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.last[ref.UID]
	if !ok && len(c.last) >= maxControllerShares {
		clear(c.last)
	}
	if ok && len(m.Labels) > 0 && maps.Equal(last.labels, m.Labels) {
		m.Labels = last.labels
	} else {
		last.labels = m.Labels
	}
	if ok && slices.EqualFunc(last.owners, m.OwnerReferences, sameOwnerReference) {
		m.OwnerReferences = last.owners
	} else {
		last.owners = m.OwnerReferences
	}
	c.last[ref.UID] = last
}

// sameOwnerReference compares two owner references field by field, the
// values their pointers point at included.
func sameOwnerReference(a, b OwnerReference) bool {
	eq := func(x, y *bool) bool { return x == y || (x != nil && y != nil && *x == *y) }
	return eq(a.Controller, b.Controller) && eq(a.BlockOwnerDeletion, b.BlockOwnerDeletion) &&
		(OwnerReference{APIVersion: a.APIVersion, Kind: a.Kind, Name: a.Name, UID: a.UID}) == (OwnerReference{APIVersion: b.APIVersion, Kind: b.Kind, Name: b.Name, UID: b.UID})
}

// isAPIAccessProjection reports whether p equals APIAccessVolume's source
// in every field (TestIsAPIAccessProjection changes each field in turn).
func isAPIAccessProjection(p *ProjectedVolumeSource) bool {
	want := apiAccessProjection
	if p.DefaultMode == nil || *p.DefaultMode != *want.DefaultMode || len(p.Sources) != len(want.Sources) {
		return false
	}
	tok, cm, dw := p.Sources[0].ServiceAccountToken, p.Sources[1].ConfigMap, p.Sources[2].DownwardAPI
	if tok == nil || cm == nil || dw == nil || p.Sources[0] != (VolumeProjection{ServiceAccountToken: tok}) ||
		p.Sources[1] != (VolumeProjection{ConfigMap: cm}) || p.Sources[2] != (VolumeProjection{DownwardAPI: dw}) {
		return false
	}
	wtok, wcm, wdw := want.Sources[0].ServiceAccountToken, want.Sources[1].ConfigMap, want.Sources[2].DownwardAPI
	if tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != *wtok.ExpirationSeconds ||
		(ServiceAccountTokenProjection{Audience: tok.Audience, Path: tok.Path}) != (ServiceAccountTokenProjection{Audience: wtok.Audience, Path: wtok.Path}) {
		return false
	}
	// KeyToPath and DownwardAPIVolumeFile compare their pointers: nil in
	// the shared source, so only nil matches.
	if cm.Name != wcm.Name || cm.Optional != nil || len(cm.Items) != 1 || cm.Items[0] != wcm.Items[0] {
		return false
	}
	if len(dw.Items) != 1 {
		return false
	}
	f, wf := dw.Items[0], wdw.Items[0]
	return f.FieldRef != nil && *f.FieldRef == *wf.FieldRef && (DownwardAPIVolumeFile{Path: f.Path, Mode: f.Mode}) == (DownwardAPIVolumeFile{Path: wf.Path})
}
