package client

import (
	"context"
	"net/http"

	"skiff.dev/skiff/api"
)

// CreateToken asks for a token of service account namespace/name: POST
// serviceaccounts/NAME/token with a TokenRequest (authentication.k8s.io/v1).
// The node agent calls it for the API access volume of its pods.
func (c *Client) CreateToken(ctx context.Context, namespace, name string, tr *api.TokenRequest) (*api.TokenRequest, error) {
	body := *tr
	body.TypeMeta = api.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"}
	var out api.TokenRequest
	k := api.MustKindOf(&api.ServiceAccount{})
	if err := c.call(ctx, http.MethodPost, PathFor(k, namespace, name, "token"), nil, &body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
