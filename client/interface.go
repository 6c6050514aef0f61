package client

import (
	"context"

	"skiff.dev/skiff/api"
)

// Interface is what every component uses to talk to the API: the CLI,
// controllers, the scheduler, the agent and tests. Two implementations:
// *Client speaks HTTP to an API server; apiserver.Local calls the API
// server's logic in process (same validation, same admission), which the
// server's own controllers use.
//
// Errors are *api.StatusError (branch with api.IsNotFound, api.IsConflict...).
// Objects passed in are not retained; objects returned belong to the caller.
type Interface interface {
	// Create an object; its kind comes from its Go type, its namespace from metadata.
	Create(ctx context.Context, obj api.Object) (api.Object, error)
	// Update an object's spec and metadata (status is kept); a stale
	// resourceVersion fails with Conflict.
	Update(ctx context.Context, obj api.Object) (api.Object, error)
	// UpdateStatus writes only the status of an object (status subresource).
	UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error)
	// Delete an object. For a pod on a node this starts a graceful delete
	// (deletionTimestamp set; the node removes it once stopped).
	Delete(ctx context.Context, kind *api.Kind, namespace, name string, opts api.DeleteOptions) error
	// Get one object or NotFound.
	Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error)
	// List objects of a kind in a namespace ("" = all namespaces), filtered
	// by selectors; returns the list's resourceVersion.
	List(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error)
	// Watch changes after opts.ResourceVersion. An Error event with a Gone
	// status means: list again. The watcher ends when ctx ends or the server
	// closes the stream.
	Watch(ctx context.Context, kind *api.Kind, namespace string, opts api.ListOptions) (Watcher, error)
	// Bind a pod to a node (pods/NAME/binding).
	Bind(ctx context.Context, b *api.Binding) error
	// GetScale and UpdateScale use the scale subresource of deployments and replicasets.
	GetScale(ctx context.Context, kind *api.Kind, namespace, name string) (*api.Scale, error)
	UpdateScale(ctx context.Context, kind *api.Kind, namespace, name string, s *api.Scale) (*api.Scale, error)
	// AddTrace appends spans to a pod's trace; GetTrace reads it.
	AddTrace(ctx context.Context, namespace, pod string, spans ...api.TraceSpan) error
	GetTrace(ctx context.Context, namespace, pod string) (*api.PodTrace, error)
}

// ObjectTracer reads and appends the in-memory trace of an object that has
// one (the trace subresource): a pod's spans, or a
// HorizontalPodAutoscaler's last decisions, which its controller posts
// after each sync. The API server keeps traces in memory only, never in
// the store. Client, the API server's Local and the fake implement it.
type ObjectTracer interface {
	AddObjectTrace(ctx context.Context, kind *api.Kind, namespace, name string, spans ...api.TraceSpan) error
	GetObjectTrace(ctx context.Context, kind *api.Kind, namespace, name string) (*api.PodTrace, error)
}

// Watcher is a running watch.
type Watcher interface {
	// Events delivers changes; it is closed when the watch ends.
	Events() <-chan Event
	// Stop ends the watch and closes Events. Safe twice.
	Stop()
	// Err tells why Events closed: nil after Stop or a normal end of
	// stream, otherwise the error (api.IsGone: relist).
	Err() error
}

// Event is a decoded watch event.
type Event struct {
	Type   api.WatchEventType
	Object api.Object
}
