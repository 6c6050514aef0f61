package agent

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// logOptions are the pods/log query parameters (Kubernetes'
// PodLogOptions) as the agent serves them.
type logOptions struct {
	follow, previous bool
	container        string
	tail             int   // last lines; < 0 for all
	limitBytes       int64 // bytes to send at most; 0 for no limit
}

// parseLogOptions reads the PodLogOptions of a log request, checked as
// Kubernetes' ValidatePodLogOptions checks them (tailLines ≥ 0,
// limitBytes and sinceSeconds > 0, not both sinceSeconds and sinceTime).
// What skiff cannot honour is refused by name, never ignored:
// sinceSeconds, sinceTime and timestamps=true need the time of each log
// line, which the runtime's log files do not keep (they hold the
// container's raw output); stream other than All, since stdout and
// stderr are one log; insecureSkipTLSVerifyBackend=true, since the API
// server always verifies the agent's certificate.
func parseLogOptions(q url.Values) (logOptions, error) {
	o := logOptions{container: q.Get("container"), tail: -1}
	var errs []error
	boolean := func(name string) bool {
		b, err := boolQuery(q.Get(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return b
	}
	integer := func(name string, min int64, msg string) (int64, bool) {
		if !q.Has(name) {
			return 0, false
		}
		n, err := strconv.ParseInt(q.Get(name), 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, q.Get(name)))
			return 0, false
		case n < min:
			errs = append(errs, fmt.Errorf("%s: Invalid value: %d: %s", name, n, msg))
			return 0, false
		}
		return n, true
	}
	o.follow, o.previous = boolean("follow"), boolean("previous")
	if n, ok := integer("tailLines", 0, "must be greater than or equal to 0"); ok {
		o.tail = int(min(n, int64(1<<31-1)))
	}
	if n, ok := integer("limitBytes", 1, "must be greater than 0"); ok {
		o.limitBytes = n
	}
	const noTimes = "not supported by skiff: the container's log keeps no time per line (use tailLines)"
	switch {
	case q.Has("sinceSeconds") && q.Has("sinceTime"):
		errs = append(errs, errors.New("at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case q.Has("sinceTime"):
		errs = append(errs, errors.New("sinceTime: "+noTimes))
	default:
		if _, ok := integer("sinceSeconds", 1, "must be greater than 0"); ok {
			errs = append(errs, errors.New("sinceSeconds: "+noTimes))
		}
	}
	if boolean("timestamps") {
		errs = append(errs, errors.New("timestamps: not supported by skiff: the container's log keeps no time per line"))
	}
	if boolean("insecureSkipTLSVerifyBackend") {
		errs = append(errs, errors.New("insecureSkipTLSVerifyBackend: not supported by skiff: the API server always verifies the agent's serving certificate"))
	}
	if s := q.Get("stream"); s != "" && s != "All" {
		errs = append(errs, fmt.Errorf("stream: Unsupported value: %q: skiff keeps stdout and stderr as one log: supported values: \"All\"", s))
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return o, errors.New(strings.Join(msgs, "; "))
	}
	return o, nil
}

// errLogLimit ends a log at its limitBytes.
var errLogLimit = errors.New("limitBytes reached")

// limitWriter passes on at most n bytes, then fails with errLogLimit (the
// runtime stops writing, even with follow).
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= l.n {
		n, err := l.w.Write(p)
		l.n -= int64(n)
		return n, err
	}
	n, err := l.w.Write(p[:l.n])
	l.n -= int64(n)
	if err == nil {
		err = errLogLimit
	}
	return n, err
}
