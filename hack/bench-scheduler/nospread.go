//go:build nospread

package main

import "skiff.dev/skiff/api"

// spreadBuilt: with -tags nospread (a tree from before topology spread
// constraints) there is no spread variant.
const spreadBuilt = false

func spreadPod(*api.Pod, int) {}
