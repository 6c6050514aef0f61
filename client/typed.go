package client

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
)

// Typed helpers: the kind comes from T, and results come back as T, so
// callers write
//
//	pod, err := client.Get[*api.Pod](ctx, c, "default", "web")
//
// instead of asserting api.Object. T is a pointer to a registered type.

func kindFor[T api.Object]() (*api.Kind, error) {
	var zero T
	return api.KindOf(zero)
}

func as[T api.Object](obj api.Object, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("got %T, want %T", obj, zero)
	}
	return t, nil
}

// Get reads one object of T's kind.
func Get[T api.Object](ctx context.Context, c Interface, namespace, name string) (T, error) {
	k, err := kindFor[T]()
	if err != nil {
		var zero T
		return zero, err
	}
	return as[T](c.Get(ctx, k, namespace, name))
}

// List lists objects of T's kind and returns them with the list's resourceVersion.
func List[T api.Object](ctx context.Context, c Interface, namespace string, opts api.ListOptions) ([]T, string, error) {
	k, err := kindFor[T]()
	if err != nil {
		return nil, "", err
	}
	objs, rv, err := c.List(ctx, k, namespace, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, err := as[T](o, nil)
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
	}
	return out, rv, nil
}

// Create creates obj and returns the stored object.
func Create[T api.Object](ctx context.Context, c Interface, obj T) (T, error) {
	return as[T](c.Create(ctx, obj))
}

// Update writes obj's spec and metadata and returns the stored object.
func Update[T api.Object](ctx context.Context, c Interface, obj T) (T, error) {
	return as[T](c.Update(ctx, obj))
}

// UpdateStatus writes obj's status and returns the stored object.
func UpdateStatus[T api.Object](ctx context.Context, c Interface, obj T) (T, error) {
	return as[T](c.UpdateStatus(ctx, obj))
}

// Delete deletes the object of T's kind.
func Delete[T api.Object](ctx context.Context, c Interface, namespace, name string, opts api.DeleteOptions) error {
	k, err := kindFor[T]()
	if err != nil {
		return err
	}
	return c.Delete(ctx, k, namespace, name, opts)
}
