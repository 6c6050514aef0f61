package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// Status is the Kubernetes Status object: the body of every API error.
type Status struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitempty"`
	// Status is "Success" or "Failure".
	Status string `json:"status,omitempty"`
	// Message is the human-readable description, printed by the CLI as
	// `Error from server (Reason): message`.
	Message string `json:"message,omitempty"`
	// Reason is machine-readable: NotFound, AlreadyExists, Conflict, Invalid,
	// BadRequest, Gone, Unauthorized, Forbidden, RequestEntityTooLarge,
	// MethodNotAllowed, InternalError, Timeout, TooManyRequests.
	Reason StatusReason `json:"reason,omitempty"`
	// Details name the object concerned and, for Invalid, each bad field.
	Details *StatusDetails `json:"details,omitempty"`
	// Code is the HTTP status code.
	Code int32 `json:"code,omitempty"`
}

// StatusReason is the machine-readable reason of a Status.
type StatusReason string

// Reasons, as Kubernetes.
const (
	ReasonNotFound        StatusReason = "NotFound"
	ReasonAlreadyExists   StatusReason = "AlreadyExists"
	ReasonConflict        StatusReason = "Conflict"
	ReasonInvalid         StatusReason = "Invalid"
	ReasonBadRequest      StatusReason = "BadRequest"
	ReasonGone            StatusReason = "Gone"
	ReasonExpired         StatusReason = "Expired"
	ReasonUnauthorized    StatusReason = "Unauthorized"
	ReasonForbidden       StatusReason = "Forbidden"
	ReasonTooLarge        StatusReason = "RequestEntityTooLarge"
	ReasonMethodNotAllowd StatusReason = "MethodNotAllowed"
	ReasonInternal        StatusReason = "InternalError"
	ReasonTimeout         StatusReason = "Timeout"
	ReasonServiceUnavail  StatusReason = "ServiceUnavailable"
	ReasonTooManyRequests StatusReason = "TooManyRequests"
)

// StatusDetails name the object of an error and its field causes.
type StatusDetails struct {
	Name   string        `json:"name,omitempty"`
	Group  string        `json:"group,omitempty"`
	Kind   string        `json:"kind,omitempty"`
	UID    string        `json:"uid,omitempty"`
	Causes []StatusCause `json:"causes,omitempty"`
	// RetryAfterSeconds, when set, is how long the client should wait
	// before it tries again (the server also sends a Retry-After header).
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
}

// StatusCause is one field error of an Invalid status.
type StatusCause struct {
	Type    string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

// StatusError is an error carrying a Status. The store, API server and
// client all return it, so callers branch with IsNotFound, IsConflict, ...
type StatusError struct{ Status Status }

func (e *StatusError) Error() string { return e.Status.Message }

// NewStatusError builds a failure Status error.
func NewStatusError(code int, reason StatusReason, msg string) *StatusError {
	return &StatusError{Status: Status{
		TypeMeta: TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   "Failure", Message: msg, Reason: reason, Code: int32(code),
	}}
}

// resourceName is "pods" or "deployments.apps", as in Kubernetes messages.
func resourceName(k *Kind) string {
	if k == nil {
		return "object"
	}
	if k.Group != "" {
		return k.Resource + "." + k.Group
	}
	return k.Resource
}

// NewNotFound: `pods "web" not found`.
func NewNotFound(k *Kind, name string) *StatusError {
	e := NewStatusError(http.StatusNotFound, ReasonNotFound, fmt.Sprintf("%s %q not found", resourceName(k), name))
	e.Status.Details = details(k, name)
	return e
}

// NewAlreadyExists: `pods "web" already exists`.
func NewAlreadyExists(k *Kind, name string) *StatusError {
	e := NewStatusError(http.StatusConflict, ReasonAlreadyExists, fmt.Sprintf("%s %q already exists", resourceName(k), name))
	e.Status.Details = details(k, name)
	return e
}

// NewConflict: `Operation cannot be fulfilled on pods "web": msg`.
func NewConflict(k *Kind, name, msg string) *StatusError {
	e := NewStatusError(http.StatusConflict, ReasonConflict,
		fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", resourceName(k), name, msg))
	e.Status.Details = details(k, name)
	return e
}

// NewGone: the requested resourceVersion is older than the watch history.
func NewGone(msg string) *StatusError {
	return NewStatusError(http.StatusGone, ReasonExpired, msg)
}

// CauseResourceVersionTooLarge is the cause type of a request for a
// resourceVersion the server has not reached yet.
const CauseResourceVersionTooLarge = "ResourceVersionTooLarge"

// NewTooLargeResourceVersion is kube-apiserver's answer to a list or watch
// from a resourceVersion newer than the store's: 504 Timeout, "Too large
// resource version: 105, current: 100", with a retry hint. Clients list
// again (from resourceVersion "") rather than wait.
func NewTooLargeResourceVersion(requested, current int64, retryAfterSeconds int32) *StatusError {
	e := NewStatusError(http.StatusGatewayTimeout, ReasonTimeout,
		fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", requested, current))
	e.Status.Details = &StatusDetails{
		Causes:            []StatusCause{{Type: CauseResourceVersionTooLarge, Message: "Too large resource version"}},
		RetryAfterSeconds: retryAfterSeconds,
	}
	return e
}

// IsTooLargeResourceVersion reports a NewTooLargeResourceVersion error.
func IsTooLargeResourceVersion(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Status.Reason != ReasonTimeout || se.Status.Details == nil {
		return false
	}
	for _, c := range se.Status.Details.Causes {
		if c.Type == CauseResourceVersionTooLarge {
			return true
		}
	}
	return false
}

// NewBadRequest: malformed input.
func NewBadRequest(msg string) *StatusError {
	return NewStatusError(http.StatusBadRequest, ReasonBadRequest, msg)
}

// NewInternal wraps an unexpected error.
func NewInternal(err error) *StatusError {
	return NewStatusError(http.StatusInternalServerError, ReasonInternal, "Internal error occurred: "+err.Error())
}

// NewInvalid: `Deployment.apps "web" is invalid: [spec.replicas: Invalid value: -1: must be ..., ...]`.
func NewInvalid(k *Kind, name string, errs FieldErrors) *StatusError {
	kind := "Object"
	if k != nil {
		kind = k.Kind
		if k.Group != "" {
			kind += "." + k.Group
		}
	}
	msg := fmt.Sprintf("%s %q is invalid: %s", kind, name, errs.Error())
	e := NewStatusError(422, ReasonInvalid, msg)
	e.Status.Details = details(k, name)
	if k != nil {
		e.Status.Details.Kind = k.Kind // as apierrors.NewInvalid: the kind, not the resource
	}
	for _, fe := range errs {
		// The body without the field, which is Field: kubectl prints
		// "FIELD: MESSAGE" for each cause.
		e.Status.Details.Causes = append(e.Status.Details.Causes, StatusCause{Type: string(fe.Type), Message: strings.TrimPrefix(fe.Error(), fe.Field+": "), Field: fe.Field})
	}
	return e
}

func details(k *Kind, name string) *StatusDetails {
	d := &StatusDetails{Name: name}
	if k != nil {
		d.Group, d.Kind = k.Group, k.Resource
	}
	return d
}

// StatusOf returns the failure Status to send for err: its own when it is a
// StatusError, an InternalError otherwise; code, kind and status filled in.
func StatusOf(err error) Status {
	var se *StatusError
	if !errors.As(err, &se) {
		se = NewInternal(err)
	}
	st := se.Status
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	st.TypeMeta = TypeMeta{APIVersion: "v1", Kind: "Status"}
	st.Status = "Failure"
	return st
}

// WriteStatus answers an HTTP request with err as the API server does: the
// Status of StatusOf(err) as JSON, its code as the HTTP status, and a
// Retry-After header when the Status asks the client to come back later
// (details.retryAfterSeconds). Every skiff HTTP server answers errors so,
// which kubectl and client-go print as `Error from server (Reason): ...`.
func WriteStatus(w http.ResponseWriter, err error) {
	st := StatusOf(err)
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	b, _ := json.Marshal(st) // strings, numbers and slices of them: it always encodes
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(b, '\n'))
}

// ReasonOf returns the Status reason of err, or "" when err is not a StatusError.
func ReasonOf(err error) StatusReason {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status.Reason
	}
	return ""
}

// CodeOf returns the HTTP code of err: its Status code, or 500.
func CodeOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) && se.Status.Code != 0 {
		return int(se.Status.Code)
	}
	return http.StatusInternalServerError
}

// IsNotFound reports a NotFound error.
func IsNotFound(err error) bool { return ReasonOf(err) == ReasonNotFound }

// IsAlreadyExists reports an AlreadyExists error.
func IsAlreadyExists(err error) bool { return ReasonOf(err) == ReasonAlreadyExists }

// IsConflict reports a Conflict (stale resourceVersion) error.
func IsConflict(err error) bool { return ReasonOf(err) == ReasonConflict }

// IsInvalid reports a validation error.
func IsInvalid(err error) bool { return ReasonOf(err) == ReasonInvalid }

// IsGone reports that a watch asked for a revision older than the history.
func IsGone(err error) bool {
	r := ReasonOf(err)
	return r == ReasonGone || r == ReasonExpired
}

// FieldErrorType classifies a validation error, as Kubernetes' field.ErrorType.
type FieldErrorType string

// Field error types.
const (
	FieldRequired     FieldErrorType = "FieldValueRequired"
	FieldInvalid      FieldErrorType = "FieldValueInvalid"
	FieldNotSupported FieldErrorType = "FieldValueNotSupported"
	FieldForbidden    FieldErrorType = "FieldValueForbidden"
	FieldDuplicate    FieldErrorType = "FieldValueDuplicate"
	FieldTooLong      FieldErrorType = "FieldValueTooLong"
	// FieldTooMany: a list over its length limit (Kubernetes' field.TooMany).
	FieldTooMany FieldErrorType = "FieldValueTooMany"
	FieldUnknown FieldErrorType = "FieldUnknown"
	// FieldNotFound: a reference to something that does not exist
	// (a volumeMount naming no volume).
	FieldNotFound FieldErrorType = "FieldValueNotFound"
	// FieldUnknownField: a field that exists neither in skiff nor in
	// Kubernetes, usually a typo ("spec.replcas").
	FieldUnknownField FieldErrorType = "FieldUnknownField"
	// FieldDuplicateField: a key given twice in one JSON or YAML object
	// (kube-apiserver's strict decoding: `duplicate field "spec.replicas"`).
	FieldDuplicateField FieldErrorType = "FieldDuplicateField"
)

// FieldError is one problem with one field, named by its path
// ("spec.template.spec.containers[0].image").
// +k8s:deepcopy-gen=false
type FieldError struct {
	Type   FieldErrorType
	Field  string
	Value  any
	Detail string
}

func (e *FieldError) Error() string {
	switch e.Type {
	case FieldRequired:
		return fmt.Sprintf("%s: Required value%s", e.Field, suffix(e.Detail))
	case FieldNotSupported:
		if e.Value == nil {
			return fmt.Sprintf("%s: Unsupported value%s", e.Field, suffix(e.Detail))
		}
		return fmt.Sprintf("%s: Unsupported value: %s%s", e.Field, quoteValue(e.Value), suffix(e.Detail))
	case FieldForbidden:
		return fmt.Sprintf("%s: Forbidden%s", e.Field, suffix(e.Detail))
	case FieldDuplicate:
		return fmt.Sprintf("%s: Duplicate value: %s", e.Field, quoteValue(e.Value))
	case FieldTooLong:
		return fmt.Sprintf("%s: Too long%s", e.Field, suffix(e.Detail))
	case FieldTooMany:
		return fmt.Sprintf("%s: Too many: %s%s", e.Field, quoteValue(e.Value), suffix(e.Detail))
	case FieldDuplicateField:
		return fmt.Sprintf("%s: duplicate field%s", e.Field, suffix(e.Detail))
	case FieldUnknown:
		return fmt.Sprintf("%s: field not supported by skiff%s", e.Field, suffix(e.Detail))
	case FieldUnknownField:
		return fmt.Sprintf("%s: unknown field%s", e.Field, suffix(e.Detail))
	case FieldNotFound:
		return fmt.Sprintf("%s: Not found: %s%s", e.Field, quoteValue(e.Value), suffix(e.Detail))
	default:
		return fmt.Sprintf("%s: Invalid value: %s%s", e.Field, quoteValue(e.Value), suffix(e.Detail))
	}
}

func suffix(d string) string {
	if d == "" {
		return ""
	}
	return ": " + d
}

// quoteValue prints a bad value as Kubernetes' field.Error does: strings
// quoted, simple types plain, Stringers by String, anything else in Go syntax
// (map[string]string{"app":"web"}).
func quoteValue(v any) string {
	if v == nil {
		return "null"
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		v = rv.Elem().Interface()
	}
	switch t := v.(type) {
	case string:
		return fmt.Sprintf("%q", t)
	case int, int64, int32, uint, uint64, uint32, float64, float32, bool:
		return fmt.Sprintf("%v", t)
	case fmt.Stringer:
		return t.String()
	default:
		return fmt.Sprintf("%#v", v)
	}
}

// FieldErrors is a list of field errors; validation reports all at once.
// +k8s:deepcopy-gen=false
type FieldErrors []*FieldError

func (l FieldErrors) Error() string {
	if len(l) == 1 {
		return l[0].Error()
	}
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// elemPath is the path of element i of the list field under p:
// elemPath("spec", ".containers", 0) is "spec.containers[0]" (field ""
// for p's own elements). Validation builds one for each element it
// checks, error or not: one allocation, where fmt.Sprintf took five
// times as long.
func elemPath(p, field string, i int) string {
	return p + field + "[" + strconv.Itoa(i) + "]"
}

// Required, Invalid, NotSupported, Forbidden, Duplicate build field errors.
func Required(field, detail string) *FieldError {
	return &FieldError{Type: FieldRequired, Field: field, Detail: detail}
}

// Invalid: the value is present but wrong.
func Invalid(field string, value any, detail string) *FieldError {
	return &FieldError{Type: FieldInvalid, Field: field, Value: value, Detail: detail}
}

// NotSupported: the value is not one of the allowed ones.
func NotSupported(field string, value any, allowed ...string) *FieldError {
	d := ""
	if len(allowed) > 0 {
		q := make([]string, len(allowed))
		for i, a := range allowed {
			q[i] = fmt.Sprintf("%q", a)
		}
		d = "supported values: " + strings.Join(q, ", ")
	}
	return &FieldError{Type: FieldNotSupported, Field: field, Value: value, Detail: d}
}

// Forbidden: the field may not be set (here, or at all).
func Forbidden(field, detail string) *FieldError {
	return &FieldError{Type: FieldForbidden, Field: field, Detail: detail}
}

// Duplicate: a value that must be unique appears twice.
func Duplicate(field string, value any) *FieldError {
	return &FieldError{Type: FieldDuplicate, Field: field, Value: value}
}

// NotFound: a reference to something that does not exist.
func NotFound(field string, value any) *FieldError {
	return &FieldError{Type: FieldNotFound, Field: field, Value: value}
}

// UnknownField: a field that exists neither in skiff nor in Kubernetes
// (usually a typo); detail may suggest the field that was meant.
func UnknownField(field, detail string) *FieldError {
	return &FieldError{Type: FieldUnknownField, Field: field, Detail: detail}
}

// DuplicateField: a key given twice in one object of a JSON or YAML body;
// detail may say where (the line of the second one).
func DuplicateField(field, detail string) *FieldError {
	return &FieldError{Type: FieldDuplicateField, Field: field, Detail: detail}
}

// Unknown: a field that Kubernetes has but skiff does not support (or that
// does not exist at all). Decoding reports these; they are never ignored.
func Unknown(field, detail string) *FieldError {
	return &FieldError{Type: FieldUnknown, Field: field, Detail: detail}
}
