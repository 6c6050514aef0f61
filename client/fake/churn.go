package fake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// Churn describes random changes to pods, for tests of what an informer
// over the fake derives (indexes, lists) against what a scan gives.
type Churn struct {
	Rand       *rand.Rand
	Namespaces []string
	Names      int // pods are named p0 .. p(Names-1) in each namespace
	Steps      int
	Every      int // Check runs after every Every steps
	// New makes the pod namespace/name that does not exist yet; Change
	// edits a copy of an existing one (labels, owners).
	New    func(namespace, name string) *api.Pod
	Change func(p *api.Pod)
	// Check runs once inf shows the fake's pods as they are now.
	Check func(step int)
}

// ChurnPods makes ch.Steps changes to f's pods: a pod picked at random is
// created when missing, deleted one time in four, else changed; after
// every ch.Every steps it waits until inf caught up (Shows) and calls
// ch.Check.
func (f *Client) ChurnPods(t testing.TB, inf *client.Informer, ch Churn) {
	t.Helper()
	ctx := context.Background()
	pods := api.MustKindOf(&api.Pod{})
	for step := range ch.Steps {
		ns := ch.Namespaces[ch.Rand.IntN(len(ch.Namespaces))]
		name := fmt.Sprintf("p%d", ch.Rand.IntN(ch.Names))
		cur, err := client.Get[*api.Pod](ctx, f, ns, name)
		switch {
		case api.IsNotFound(err):
			_, err = client.Create(ctx, f, ch.New(ns, name))
		case err != nil:
		case ch.Rand.IntN(4) == 0:
			err = f.Delete(ctx, pods, ns, name, api.DeleteOptions{})
		default:
			p := api.Clone(cur)
			ch.Change(p)
			_, err = client.Update(ctx, f, p)
		}
		if err != nil {
			t.Fatalf("step %d, pod %s/%s: %v", step, ns, name, err)
		}
		if step%ch.Every == ch.Every-1 {
			testwait.For(t, 10*time.Second, "the informer to catch up", func() bool { return f.Shows(pods, inf.List()) })
			ch.Check(step)
		}
	}
}
