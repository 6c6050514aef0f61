package api

// Placeholder bodies: the api helper replaces this file with real defaulting
// and validation. Signatures are the contract the API server codes against.

// SetDefaults fills defaulted fields of a new or updated object, as
// Kubernetes' defaulting (replicas 1, restartPolicy Always, protocol TCP, ...).
func SetDefaults(obj Object) {}

// Validate checks an object and returns every problem with its field path.
func Validate(obj Object) FieldErrors { return nil }

// ValidateUpdate checks an update against the stored object (immutable
// fields such as a Deployment's selector or a Pod's spec) plus Validate.
func ValidateUpdate(newObj, oldObj Object) FieldErrors { return Validate(newObj) }
