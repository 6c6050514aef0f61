//go:build !benchdra

package main

import (
	"context"
	"errors"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// draBuilt: without -tags benchdra (a tree from before DRA) there is no
// dra variant.
const draBuilt = false

func setupDRA(context.Context, client.Interface, []string) error {
	return errors.New("built without -tags benchdra")
}

func draPod(*api.Pod) {}
