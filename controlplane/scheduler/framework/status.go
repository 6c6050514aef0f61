package framework

import (
	"errors"
	"strings"
)

// Code says how a plugin's answer should be read.
type Code int

// The codes a plugin may return. Their order matters only for String.
const (
	// Success: the pod may go on (a nil *Status means Success too).
	Success Code = iota
	// Error: the plugin failed for an internal reason; the cycle stops and
	// the pod is retried with backoff.
	Error
	// Unschedulable: the pod does not fit this node now, but evicting
	// lower-priority pods could make it fit (e.g. "Insufficient cpu").
	Unschedulable
	// UnschedulableAndUnresolvable: the pod cannot fit this node whatever
	// is evicted (e.g. a label mismatch); preemption skips the node.
	UnschedulableAndUnresolvable
	// Skip: a Bind plugin leaves the pod to the next bind plugin.
	Skip
	// Wait: a Permit plugin holds the pod, assumed, until it is allowed,
	// rejected or times out (see PermitPlugin).
	Wait
)

// String returns the code's name.
func (c Code) String() string {
	switch c {
	case Success:
		return "Success"
	case Error:
		return "Error"
	case Unschedulable:
		return "Unschedulable"
	case UnschedulableAndUnresolvable:
		return "UnschedulableAndUnresolvable"
	case Skip:
		return "Skip"
	case Wait:
		return "Wait"
	}
	return "Unknown"
}

// Status is a plugin's answer: a code and the reasons behind it. Reasons are
// the exact words users read: the FailedScheduling message counts nodes per
// reason ("2 Insufficient nvidia.com/gpu").
//
// A nil *Status is Success, so plugins return nil on the happy path. A
// Status is never changed after it is returned, so plugins may return a
// shared, prebuilt one.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
	details []string
}

// WithDetails returns a copy of s with explanation lines beyond the
// reasons (which stay Kubernetes' words, counted in FailedScheduling):
// the DynamicResources plugin says which request and selector failed.
// Explain shows them under the node.
func (s *Status) WithDetails(lines ...string) *Status {
	if s == nil || len(lines) == 0 {
		return s
	}
	c := *s
	c.details = lines
	return &c
}

// Details are the explanation lines of WithDetails; nil when none.
func (s *Status) Details() []string {
	if s == nil {
		return nil
	}
	return s.details
}

// WithPlugin returns a copy of s naming the plugin that answered (nil
// stays nil: success needs no name).
func (s *Status) WithPlugin(plugin string) *Status {
	if s == nil {
		return nil
	}
	c := *s
	c.plugin = plugin
	return &c
}

// Plugin is the plugin that answered, when the framework recorded it
// (Permit statuses); "" otherwise.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// NewStatus returns a status with a code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an internal error as an Error status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code of the status; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether the status is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsRejected reports whether the node was rejected (either Unschedulable code).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the reasons; do not modify the slice.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// AsError returns nil for success and an error otherwise; the original
// error for Error statuses.
func (s *Status) AsError() error {
	if s.IsSuccess() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}
