package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff.dev/skiff/api"
)

// Field validation, kube-apiserver's fieldValidation query parameter on
// create, update and patch: what decoding the body does with a field the
// kind does not have and with a key given twice.
//
//	Strict  refuse the request, naming each (400)
//	Warn    drop them, and say so in a Warning header each
//	Ignore  drop them silently
//
// Without the parameter skiff is Strict (kube-apiserver is Warn): the
// course wants a typo refused, never silently dropped. A value other than
// these three (or empty) is 422, checked and worded by Kubernetes' own
// validation (metav1validation.ValidateFieldValidation). In every mode a
// Kubernetes field that skiff does not implement, and a value of the wrong
// type, are refused (api.DecodeJSONWith).
//
// kubectl learns from the OpenAPI documents (openapi.go: the
// fieldValidation parameter of each PATCH) that the server validates, and
// then sends fieldValidation=Strict (--validate=strict, its default),
// Warn or Ignore instead of validating locally. For a request that names
// the parameter, a refusal reads as kube-apiserver's:
//
//	Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica"
//
// Without it, skiff's own message says more (the closest field's name,
// "field not supported by skiff").

type fieldValidationKey struct{}

// fieldValidation is the mode of one request.
type fieldValidation struct {
	mode api.FieldValidation
	// explicit: the request named the mode (kubectl always does).
	explicit bool
}

// withFieldValidation reads r's fieldValidation parameter into ctx. The
// error, for a value kube-apiserver would not accept, is its 422.
func withFieldValidation(ctx context.Context, r *http.Request) (context.Context, error) {
	fv := fieldValidation{mode: api.FieldValidationStrict}
	options := bodyOptionsKind(r.Method)
	if v := queryGet(r, "fieldValidation"); v != "" && options != "" {
		if errs := metav1validation.ValidateFieldValidation(field.NewPath("fieldValidation"), v); len(errs) > 0 {
			return ctx, invalidOptions(options, errs) // dryrun.go
		}
		fv = fieldValidation{mode: api.FieldValidation(v), explicit: true}
	}
	return context.WithValue(ctx, fieldValidationKey{}, fv), nil
}

// fieldValidationFrom is the mode withFieldValidation put in ctx; Strict
// when none (in-process callers).
func fieldValidationFrom(ctx context.Context) fieldValidation {
	if fv, ok := ctx.Value(fieldValidationKey{}).(fieldValidation); ok {
		return fv
	}
	return fieldValidation{mode: api.FieldValidationStrict}
}

// strictText is one strict decoding problem in kube-apiserver's (and
// sigs.k8s.io/json's) words: `unknown field "spec.foo"`, `duplicate field
// "spec.replicas"`; false for other problems.
func strictText(fe *api.FieldError) (string, bool) {
	switch fe.Type {
	case api.FieldUnknownField:
		return fmt.Sprintf("unknown field %q", fe.Field), true
	case api.FieldDuplicateField:
		return fmt.Sprintf("duplicate field %q", fe.Field), true
	}
	return "", false
}

// strictDecodingMessage is kube-apiserver's message refusing a body of
// kind k for the strict decoding problems fes; false when one of fes is
// another kind of problem (skiff's message then says it better).
func strictDecodingMessage(k *api.Kind, fes api.FieldErrors) (string, bool) {
	if len(fes) == 0 {
		return "", false
	}
	texts := make([]string, 0, len(fes))
	for _, fe := range fes {
		t, ok := strictText(fe)
		if !ok {
			return "", false
		}
		texts = append(texts, t)
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
		k.Kind, k.Version, k.Kind, strings.Join(texts, ", ")), true
}

// warnDropped sends a warning for each field Warn dropped.
func warnDropped(ctx context.Context, fv fieldValidation, dropped api.FieldErrors) {
	if fv.mode != api.FieldValidationWarn {
		return
	}
	for _, fe := range dropped {
		if t, ok := strictText(fe); ok {
			addWarning(ctx, t)
		}
	}
}
