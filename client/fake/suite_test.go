package fake_test

import (
	"testing"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/clienttest"
	"skiff.dev/skiff/client/fake"
)

// TestSuite runs the client.Interface suite that the API server's Local
// passes too.
func TestSuite(t *testing.T) {
	clienttest.Run(t, clienttest.Target{
		New: func(testing.TB) client.Interface {
			f := fake.New()
			f.StopPodsAtOnce(false) // the API's rules alone, as the API server's Local
			return f
		},
		ExpireHistory: func(_ testing.TB, c client.Interface) {
			c.(*fake.Client).ExpireWatches()
		},
	})
}
