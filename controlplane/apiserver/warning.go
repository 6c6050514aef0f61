package apiserver

import (
	"context"
	"net/http"
	"sync"
	"unicode/utf8"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// API warnings, as kube-apiserver sends them (KEP-1693): a request that
// succeeds may carry warnings for the client to show, one HTTP header each,
//
//	Warning: 299 - "would violate PodSecurity \"restricted:latest\": ..."
//
// (RFC 7234 format: code 299, agent "-", the text quoted). kubectl prints
// each as "Warning: TEXT" on stderr; so does skiff's CLI (client.Client's
// warning handler). Admission adds them through the request's context
// (addWarning); the HTTP handler installs the recorder (withWarnings). A
// request without one (Local, in-process controllers) drops them.
//
// As kube-apiserver's recorder: the same text is sent once per request,
// and the warnings of one request are bounded (warningTotalRunes in all;
// past it, each is cut to warningItemRunes, and what still does not fit is
// dropped).
const (
	warningTotalRunes = 4 * 1024
	warningItemRunes  = 256
)

type warningsKey struct{}

// warningRecorder adds Warning headers to one response.
type warningRecorder struct {
	mu    sync.Mutex
	h     http.Header
	seen  map[string]bool
	runes int
}

// withWarnings returns ctx carrying a recorder that adds warnings to w's
// headers (before the handler writes them).
func withWarnings(ctx context.Context, w http.ResponseWriter) context.Context {
	return context.WithValue(ctx, warningsKey{}, &warningRecorder{h: w.Header(), seen: map[string]bool{}})
}

// addWarning sends text as a warning of the request ctx belongs to, if it
// has a recorder.
func addWarning(ctx context.Context, text string) {
	rec, _ := ctx.Value(warningsKey{}).(*warningRecorder)
	if rec == nil || text == "" {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.seen[text] {
		return
	}
	rec.seen[text] = true
	if n := utf8.RuneCountInString(text); rec.runes+n > warningTotalRunes {
		text = truncateRunes(text, warningItemRunes)
	}
	n := utf8.RuneCountInString(text)
	if rec.runes+n > warningTotalRunes {
		return
	}
	v, err := utilnet.NewWarningHeader(299, "-", text)
	if err != nil {
		return // an invalid text (control characters): not sent, as kube-apiserver
	}
	rec.runes += n
	rec.h.Add("Warning", v)
}

func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
