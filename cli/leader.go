package cli

import (
	"context"
	"fmt"
	"io"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// serverLeader asks the server c talks to who leads the control plane
// (GET /skiff/v1/leader, served by servers on etcd). ok is false when the
// server does not serve it: one server on bbolt, which runs everything
// itself.
func serverLeader(ctx context.Context, c client.Interface) (ls api.LeaderStatus, ok bool, err error) {
	cl, isClient := c.(*client.Client)
	if !isClient {
		return ls, false, nil
	}
	resp, err := cl.Do(ctx, "GET", api.LeaderPath, nil)
	if api.IsNotFound(err) {
		return ls, false, nil
	}
	if err != nil {
		return ls, false, fmt.Errorf("ask who leads: %w", err)
	}
	defer resp.Body.Close()
	if err := decodeJSON(resp.Body, &ls); err != nil {
		return ls, false, fmt.Errorf("ask who leads: decode: %w", err)
	}
	return ls, true, nil
}

// describeServer is "NAME (URL)".
func describeServer(li api.LeaderInfo) string {
	if li.APIServer == "" {
		return li.Name
	}
	return fmt.Sprintf("%s (%s)", li.Name, li.APIServer)
}

// printLeader prints, for a cluster of several servers, which one leads
// (runs the scheduler and the controllers) and which one answered; for
// one server on bbolt, nothing.
func printLeader(ctx context.Context, w io.Writer, c client.Interface) {
	ls, ok, err := serverLeader(ctx, c)
	switch {
	case err != nil:
		fmt.Fprintf(w, "Leader: unknown (%v)\n", err)
	case !ok:
	case ls.Leader.Name == "":
		fmt.Fprintf(w, "Leader: none yet (an election is under way)\nAnswered by: %s\n", describeServer(ls.Self))
	default:
		fmt.Fprintf(w, "Leader: %s\nAnswered by: %s\n", describeServer(ls.Leader), describeServer(ls.Self))
	}
}
