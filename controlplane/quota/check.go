package quota

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"skiff.dev/skiff/api"
)

// Request is one write that quota admission charges: a create (Old nil)
// or an update of Obj, an object of Kind.
type Request struct {
	Kind     *api.Kind
	Obj, Old api.Object
	// Now decides whether a deleted pod still counts.
	Now time.Time
}

// ErrForbidden marks a request that quota refuses; its message is
// Kubernetes' (the API server answers 403 `pods "x" is forbidden: ...`).
var ErrForbidden = errors.New("forbidden by quota")

// refused is an ErrForbidden with Kubernetes' message.
type refused struct{ msg string }

func (e *refused) Error() string        { return e.msg }
func (e *refused) Is(target error) bool { return target == ErrForbidden }

func refuse(format string, args ...any) error { return &refused{msg: fmt.Sprintf(format, args...)} }

// Check is Kubernetes' CheckRequest: the usage req adds to each quota of
// quotas (by index) that covers it, or an ErrForbidden in Kubernetes'
// words when one would go over its status.hard ("exceeded quota: gpus,
// requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1,
// limited: requests.nvidia.com/gpu=1"), when a container does not name
// a capped compute resource ("failed quota: NAME: must specify ..."), or
// when a quota's usage is not known yet ("status unknown for quota").
// Quotas are read, never changed; an index absent from the result is not
// charged.
func Check(quotas []*api.ResourceQuota, req Request) (map[int]api.ResourceList, error) {
	var interesting []int
	for i, q := range quotas {
		if !Matches(q, req.Kind, req.Obj) {
			continue
		}
		var restricted []string
		for _, name := range Names(q.Status.Hard) {
			if Covers(req.Kind, name) {
				restricted = append(restricted, name)
			}
		}
		if p, ok := req.Obj.(*api.Pod); ok {
			if err := Constraints(restricted, p); err != nil {
				return nil, refuse("failed quota: %s: %v", q.Name, err)
			}
		}
		for _, name := range restricted {
			if _, ok := q.Status.Used[name]; !ok {
				return nil, refuse("status unknown for quota: %s, resources: %s", q.Name, strings.Join(restricted, ","))
			}
		}
		interesting = append(interesting, i)
	}
	if len(interesting) == 0 {
		return nil, nil
	}
	usage := Usage(req.Kind, req.Obj, req.Now)
	if neg := negative(usage); len(neg) > 0 {
		return nil, refuse("quota usage is negative for resource(s): %s", strings.Join(neg, ","))
	}
	deltas := map[int]api.ResourceList{}
	for _, i := range interesting {
		delta := usage
		if req.Old != nil && Matches(quotas[i], req.Kind, req.Old) {
			delta = SubtractNonNegative(usage, Usage(req.Kind, req.Old, req.Now))
		}
		if delta = RemoveZeros(delta); len(delta) > 0 {
			deltas[i] = delta
		}
	}
	for _, i := range interesting {
		delta, ok := deltas[i]
		if !ok {
			continue
		}
		q := quotas[i]
		requested := Mask(delta, Names(q.Status.Hard))
		if len(requested) == 0 {
			delete(deltas, i)
			continue
		}
		if exceeded := exceeds(q.Status.Used, requested, q.Status.Hard); len(exceeded) > 0 {
			return nil, refuse("exceeded quota: %s, requested: %s, used: %s, limited: %s", q.Name,
				PrettyPrint(Mask(requested, exceeded)), PrettyPrint(Mask(q.Status.Used, exceeded)), PrettyPrint(Mask(q.Status.Hard, exceeded)))
		}
		deltas[i] = requested
	}
	return deltas, nil
}

// UsageChanged reports whether an update of old to obj can change what
// a quota counts: its usage, or (a pod) whether it is Terminating.
func UsageChanged(k *api.Kind, obj, old api.Object, now time.Time) bool {
	if p, ok := obj.(*api.Pod); ok {
		if o, ok := old.(*api.Pod); ok && terminating(p) != terminating(o) {
			return true
		}
	}
	return !Equal(Usage(k, obj, now), Usage(k, old, now))
}
