package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// resourceVersion semantics, as kube-apiserver's
//
// A resourceVersion is the store's revision as a decimal string; "" and
// "0" mean none. A list reads:
//   - "" (or "0", "any": skiff has no cache, so the newest is as cheap):
//     the current objects;
//   - a revision with resourceVersionMatch NotOlderThan (the default): the
//     current objects, once the store has reached that revision;
//   - a revision with resourceVersionMatch Exact: the objects at that
//     revision, which the store can serve only when nothing of the kind
//     changed since (else 410 Expired: list again without it).
//
// A list or watch from a revision the store has not reached waits up to
// freshnessTimeout for it (a commit wakes the wait), then fails with 504
// Timeout "Too large resource version" and a retry hint: the client lists
// again from "". That happens when a client remembers a revision from
// before the store was recreated (a wiped data directory).

// freshnessTimeout is how long a request for a revision the store has not
// reached waits for it: kube-apiserver's watch cache blockTimeout (3 s).
const freshnessTimeout = 3 * time.Second

// tooLargeRetrySeconds is the retry hint of the 504, as the watch cache's
// resourceVersionTooHighRetrySeconds.
const tooLargeRetrySeconds = 1

// parseResourceVersion reads a resourceVersion given at path (resourceVersion
// on a list, metadata.resourceVersion in an object); "" and "0" are 0. A
// malformed one is 400 with kube-apiserver's message:
// `invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`.
func parseResourceVersion(path, rv string) (int64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err == nil && n > math.MaxInt64 {
		err = fmt.Errorf("must be at most %d", int64(math.MaxInt64))
	}
	if err != nil {
		return 0, api.NewBadRequest("invalid resource version: " + field.Invalid(field.NewPath(path), rv, err.Error()).Error())
	}
	return int64(n), nil
}

// checkListOptions applies Kubernetes' ValidateListOptions to what skiff
// reads of a list or watch request. skiff is a server without the
// WatchList feature: sendInitialEvents is refused with Kubernetes' words.
// continueToken and sendInitialEvents come only from HTTP requests.
func checkListOptions(opts api.ListOptions, watch bool, continueToken string, sendInitialEvents *bool) error {
	errs := validation.ValidateListOptions(&internalversion.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatch(opts.ResourceVersionMatch),
		Watch:                watch,
		Continue:             continueToken,
		SendInitialEvents:    sendInitialEvents,
	}, false)
	if len(errs) == 0 {
		return nil
	}
	return invalidListOptions(errs)
}

// invalidListOptions is apierrors.NewInvalid(ListOptions.meta.k8s.io, "", errs),
// word for word: 422 `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: ...`.
func invalidListOptions(errs field.ErrorList) *api.StatusError {
	return invalidOptions("ListOptions", errs) // dryrun.go
}

// waitForRevision waits up to the registry's freshness timeout for the store
// to reach rev, and fails with 504 "Too large resource version" after it.
func (r *Registry) waitForRevision(ctx context.Context, rev int64) error {
	if r.store.Revision() >= rev {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, r.freshWait)
	defer cancel()
	err := r.store.WaitForRevision(wctx, rev)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err() // the caller gave up first
	case errors.Is(err, context.DeadlineExceeded):
		return api.NewTooLargeResourceVersion(rev, r.store.Revision(), tooLargeRetrySeconds)
	}
	return err
}

// listAt reads the objects of a kind as opts' resourceVersion and
// resourceVersionMatch say, and the revision the list is at. Where the
// store can (store.FilteredLister), it decodes only the objects whose JSON
// holds every needle (api.FieldNeedles: the caller's field selector still
// decides); a list at an exact revision decodes them all.
func (r *Registry) listAt(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions, needles [][]byte) ([]api.Object, int64, error) {
	rev, err := parseResourceVersion("resourceVersion", opts.ResourceVersion)
	if err != nil {
		return nil, 0, err
	}
	if rev != 0 {
		if err := r.waitForRevision(ctx, rev); err != nil {
			return nil, 0, err
		}
		if opts.ResourceVersionMatch == string(metav1.ResourceVersionMatchExact) {
			items, err := r.store.ListExact(ctx, k, namespace, rev)
			return items, rev, err
		}
		// NotOlderThan: the store is at rev or later.
	}
	if fl, ok := r.store.(store.FilteredLister); ok && len(needles) > 0 {
		return fl.ListFiltered(ctx, k, namespace, func(raw []byte) bool {
			for _, n := range needles {
				if !bytes.Contains(raw, n) {
					return false
				}
			}
			return true
		})
	}
	return r.store.List(ctx, k, namespace)
}
