package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteStatus(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       int
		reason     StatusReason
		message    string
		retryAfter string
	}{
		{name: "status error", err: NewNotFound(MustKindOf(&Pod{}), "web"), code: http.StatusNotFound, reason: ReasonNotFound, message: `pods "web" not found`},
		{name: "wrapped status error", err: fmt.Errorf("get: %w", NewBadRequest("no name")), code: http.StatusBadRequest, reason: ReasonBadRequest, message: "no name"},
		{name: "plain error", err: errors.New("disk on fire"), code: http.StatusInternalServerError, reason: ReasonInternal, message: "Internal error occurred: disk on fire"},
		{name: "retry after", err: NewTooLargeResourceVersion(9, 3, 2), code: http.StatusGatewayTimeout, reason: ReasonTimeout,
			message: "Timeout: Too large resource version: 9, current: 3", retryAfter: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteStatus(rec, tt.err)
			if rec.Code != tt.code {
				t.Errorf("code %d, want %d", rec.Code, tt.code)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if ra := rec.Header().Get("Retry-After"); ra != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", ra, tt.retryAfter)
			}
			var st Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != "Failure" {
				t.Errorf("body is %s/%s status %q, want v1/Status Failure", st.APIVersion, st.Kind, st.Status)
			}
			if st.Reason != tt.reason || st.Message != tt.message || int(st.Code) != tt.code {
				t.Errorf("body reason %q message %q code %d, want %q %q %d", st.Reason, st.Message, st.Code, tt.reason, tt.message, tt.code)
			}
		})
	}
}
