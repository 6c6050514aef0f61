package controllers

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Controller history, as Kubernetes' pkg/controller/history: DaemonSets
// and StatefulSets keep their rollout history in ControllerRevisions, one
// per pod template they ever had. A revision is named
// <owner>-<hash of the template>, carries the hash in the label
// controller-revision-hash (the same label the owner's pods carry, so a
// pod says which revision it was made from) and holds, in data, the
// strategic merge patch that puts that template back:
//
//	{"spec":{"template":{"$patch":"replace","metadata":{...},"spec":{...}}}}
//
// `rollout undo` applies that patch to the owner; the owner's controller
// then finds the old revision matching again and gives it the next
// revision number, as a Deployment's ReplicaSets do.

func controllerRevisionKind() *api.Kind { return api.MustKindOf(&api.ControllerRevision{}) }

// revisionHash is Kubernetes' ComputeHash(template, collisionCount): the
// template's hash, with the collision count mixed in when there is one
// (a revision of another template took the name).
func revisionHash(template *api.PodTemplateSpec, collisionCount *int32) string {
	b, err := json.Marshal(template)
	if err != nil {
		panic(fmt.Sprintf("controllers: encode pod template: %v", err)) // plain data always encodes
	}
	h := fnv.New32a()
	h.Write(b)
	if collisionCount != nil {
		var c [4]byte
		binary.LittleEndian.PutUint32(c[:], uint32(*collisionCount))
		h.Write(c[:])
	}
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// newRevision builds the revision of owner's template at number revision.
func newRevision(owner api.Object, template *api.PodTemplateSpec, hash string, revision int64) (*api.ControllerRevision, error) {
	data, err := api.RevisionPatch(template)
	if err != nil {
		return nil, err
	}
	om := owner.GetObjectMeta()
	lbls := maps.Clone(template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[api.LabelControllerRevisionHash] = hash
	rev := &api.ControllerRevision{
		ObjectMeta: api.ObjectMeta{
			Name:            om.Name + "-" + hash,
			Namespace:       om.Namespace,
			Labels:          lbls,
			Annotations:     maps.Clone(om.Annotations), // the change-cause among them, for rollout history
			OwnerReferences: []api.OwnerReference{controllerRef(owner)},
		},
		Data:     data,
		Revision: revision,
	}
	api.SetTypeMeta(rev)
	return rev, nil
}

// maxRevisionOf is the highest revision number among revs (0 for none).
func maxRevisionOf(revs []*api.ControllerRevision) int64 {
	var m int64
	for _, r := range revs {
		m = max(m, r.Revision)
	}
	return m
}

// sortRevisions orders revisions oldest first.
func sortRevisions(revs []*api.ControllerRevision) {
	slices.SortStableFunc(revs, func(a, b *api.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
}

// history is what constructHistory found: the revision of the owner's
// current template (created if it was missing) and all the others.
type history struct {
	cur *api.ControllerRevision
	old []*api.ControllerRevision
	// created: cur was made by this reconcile.
	created bool
}

// constructHistory claims the owner's revisions (selector and controller
// reference, as for pods), finds the one matching template and makes sure
// it carries the highest revision number: a new template gets a new
// revision, and an old template brought back (rollout undo) has its
// revision renumbered. Two revisions of the same template (a crash between
// writes) are merged into the newer one. collision is the owner's
// status.collisionCount; bumpCollision raises it when another template's
// revision already holds the name.
func constructHistory(ctx context.Context, c client.Interface, owner api.Object, sel labels.Selector, revLister Lister,
	template *api.PodTemplateSpec, collision *int32, bumpCollision func(context.Context) error) (*history, error) {
	om := owner.GetObjectMeta()
	revs, err := claim(ctx, c, owner, sel, listAs[*api.ControllerRevision](revLister.ListBy(nil, om.Namespace)))
	if err != nil {
		return nil, fmt.Errorf("claim revisions: %w", err)
	}
	h := &history{}
	var current []*api.ControllerRevision
	for _, r := range revs {
		if api.RevisionHolds(r, template) {
			current = append(current, r)
		} else {
			h.old = append(h.old, r)
		}
	}
	next := maxRevisionOf(h.old) + 1
	switch len(current) {
	case 0:
		hash := revisionHash(template, collision)
		rev, err := newRevision(owner, template, hash, next)
		if err != nil {
			return nil, err
		}
		out, err := c.Create(ctx, rev)
		switch {
		case err == nil:
			h.cur, h.created = out.(*api.ControllerRevision), true
		case api.IsAlreadyExists(err):
			existing, gerr := client.Get[*api.ControllerRevision](ctx, c, om.Namespace, rev.Name)
			if gerr != nil {
				return nil, fmt.Errorf("read revision %s: %w", rev.Name, gerr)
			}
			if !api.RevisionHolds(existing, template) || !api.IsControlledBy(existing, om.UID) {
				// Another template's revision has this name: change the hash.
				if err := bumpCollision(ctx); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("revision name %s is taken by another template; collisionCount raised", rev.Name)
			}
			h.cur = existing
		default:
			return nil, fmt.Errorf("create revision %s: %w", rev.Name, err)
		}
	default:
		sortRevisions(current)
		h.cur = current[len(current)-1]
		for _, dup := range current[:len(current)-1] {
			uid := dup.UID
			if err := c.Delete(ctx, controllerRevisionKind(), dup.Namespace, dup.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}}); err != nil && !api.IsNotFound(err) {
				return nil, fmt.Errorf("delete duplicate revision %s: %w", dup.Name, err)
			}
		}
	}
	if h.cur.Revision < next {
		u := api.Clone(h.cur)
		u.Revision = next
		out, err := c.Update(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("renumber revision %s to %d: %w", u.Name, next, err)
		}
		h.cur = out.(*api.ControllerRevision)
	}
	return h, nil
}

// truncateHistory deletes the oldest revisions of old that are not live
// (a pod or the owner's status still names them) until at most limit are
// left: of all old ones (a DaemonSet's rule, liveCount) or of the dead
// ones only (a StatefulSet's).
func truncateHistory(ctx context.Context, c client.Interface, old []*api.ControllerRevision, limit int32, liveCount bool, live func(*api.ControllerRevision) bool) (int, error) {
	var dead []*api.ControllerRevision
	for _, r := range old {
		if !live(r) {
			dead = append(dead, r)
		}
	}
	toKill := len(dead) - int(limit)
	if liveCount {
		toKill = min(len(old)-int(limit), len(dead))
	}
	if toKill <= 0 {
		return 0, nil
	}
	sortRevisions(dead)
	deleted := 0
	for _, r := range dead[:toKill] {
		uid := r.UID
		if err := c.Delete(ctx, controllerRevisionKind(), r.Namespace, r.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}}); err != nil && !api.IsNotFound(err) {
			return deleted, fmt.Errorf("delete revision %s: %w", r.Name, err)
		}
		deleted++
	}
	return deleted, nil
}
