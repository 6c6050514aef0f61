package cluster

import (
	"context"
	"net/http"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/backoff"
)

// RemoveMember takes a server's etcd member out of a cluster on embedded
// etcd, for good (`skiff server remove-member`: a server whose machine is
// lost). It asks the server c talks to (DELETE api.MemberPath(name), with
// the token), which removes the member and the server's record. etcd's own
// check refuses a removal that would break the quorum of the members left,
// which the server answers with 503 Service Unavailable: RemoveMember asks
// again every second, calling busy with each refusal, until ctx ends.
func RemoveMember(ctx context.Context, c *client.Client, name string, busy func(error)) error {
	b := &backoff.Backoff{Policy: backoff.Policy{Initial: time.Second, Max: time.Second}}
	return b.Retry(ctx, api.IsServiceUnavailable, busy,
		func(ctx context.Context) error {
			resp, err := c.Do(ctx, http.MethodDelete, api.MemberPath(name), nil)
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
}
