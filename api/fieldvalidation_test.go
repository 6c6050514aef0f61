package api

import (
	"errors"
	"testing"
)

// Warn and Ignore let unknown fields and duplicate keys through (and say
// which); Strict refuses them; nothing lets a field skiff does not support,
// or a value of the wrong type, through.
func TestDecodeJSONWithFieldValidation(t *testing.T) {
	k, err := LookupKind("apps/v1", "Deployment")
	if err != nil {
		t.Fatal(err)
	}
	const (
		typo      = `{"metadata":{"name":"d"},"spec":{"replica":3,"replicas":2,"selector":{"matchLabels":{"a":"b"}}}}`
		dup       = `{"metadata":{"name":"d"},"spec":{"replicas":1,"replicas":4}}`
		unsupp    = `{"metadata":{"name":"d"},"spec":{"template":{"spec":{"securityContext":{"seLinuxOptions":{}}}}}}`
		wrongType = `{"metadata":{"name":"d"},"spec":{"replicas":"3","foo":1}}`
	)
	tests := []struct {
		name     string
		body     string
		mode     FieldValidation
		wantErr  []FieldErrorType // the errors' field types, nil for success
		dropped  []string         // paths dropped under Warn/Ignore
		replicas int32
	}{
		{"strict typo", typo, FieldValidationStrict, []FieldErrorType{FieldUnknownField}, nil, 0},
		{"warn typo", typo, FieldValidationWarn, nil, []string{"spec.replica"}, 2},
		{"ignore typo", typo, FieldValidationIgnore, nil, []string{"spec.replica"}, 2},
		{"strict duplicate", dup, FieldValidationStrict, []FieldErrorType{FieldDuplicateField}, nil, 0},
		{"warn duplicate keeps the last", dup, FieldValidationWarn, nil, []string{"spec.replicas"}, 4},
		{"ignore unsupported field", unsupp, FieldValidationIgnore, []FieldErrorType{FieldUnknown}, nil, 0},
		{"warn wrong type", wrongType, FieldValidationWarn, []FieldErrorType{FieldInvalid}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, dropped, err := DecodeJSONWith(k, []byte(tt.body), tt.mode)
			if tt.wantErr != nil {
				de, ok := errors.AsType[*DecodeError](err)
				if !ok {
					t.Fatalf("err = %v, want a DecodeError", err)
				}
				var got []FieldErrorType
				for _, fe := range de.Fields {
					got = append(got, fe.Type)
				}
				if len(got) != len(tt.wantErr) || got[0] != tt.wantErr[0] {
					t.Fatalf("field errors %v (%v), want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, fe := range dropped {
				paths = append(paths, fe.Field)
			}
			if len(paths) != len(tt.dropped) || paths[0] != tt.dropped[0] {
				t.Errorf("dropped %v, want %v", paths, tt.dropped)
			}
			if r := o.(*Deployment).Spec.Replicas; r == nil || *r != tt.replicas {
				t.Errorf("replicas %v, want %d", r, tt.replicas)
			}
		})
	}
}
