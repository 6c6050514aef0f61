package apiserver

import (
	"net/url"
	"slices"
	"strings"
)

// loggedQuery is the query of a request as the request log shows it. The
// web dashboard's queries carry secrets (the one-time login code of
// /dashboard/login?code=...), so under DashboardPrefix only the
// parameters' names are logged; the API's own queries (labelSelector,
// watch, resourceVersion, ...) are logged as they came.
func loggedQuery(u *url.URL) string {
	if !strings.HasPrefix(u.Path, DashboardPrefix) || u.RawQuery == "" {
		return u.RawQuery
	}
	var names []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		name, _, _ := strings.Cut(kv, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, "&")
}
