package kubectl

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Update is a read-modify-write of one object with conflict retries, as
// kubectl's patches effectively do. edit gets a copy of the live object;
// it returns whether it changed anything (false: nothing is written), or
// an error to stop. Update reports whether it wrote.
func Update(ctx context.Context, cl client.Interface, k *api.Kind, ns, name string, edit func(api.Object) (bool, error)) (bool, error) {
	const retries = 5
	for i := 0; ; i++ {
		cur, err := cl.Get(ctx, k, ns, name)
		if err != nil {
			return false, err
		}
		next := api.Clone(cur)
		changed, err := edit(next)
		if err != nil || !changed {
			return false, err
		}
		if _, err = cl.Update(ctx, next); err == nil {
			return true, nil
		}
		if !api.IsConflict(err) || i == retries {
			return false, err
		}
	}
}

// UpdateNode is Update of a Node; edit returns false for "nothing to do".
func UpdateNode(ctx context.Context, cl client.Interface, name string, edit func(*api.Node) bool) (bool, error) {
	return Update(ctx, cl, nodeKind, "", name, func(o api.Object) (bool, error) { return edit(o.(*api.Node)), nil })
}

var nodeKind = api.MustKindOf(&api.Node{})
