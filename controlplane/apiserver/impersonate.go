package apiserver

import (
	"net/http"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
)

// # Impersonation
//
// `kubectl --as bob --as-group students` sends the request with its own
// credential and the headers Impersonate-User and Impersonate-Group; the
// server then acts as that user, after checking, as Kubernetes'
// impersonation filter, that the authenticated user may impersonate each
// of them (RBAC's impersonate verb on users, groups or serviceaccounts,
// the name as resourceName; on uids and userextras/KEY for those
// headers). The teacher (system:masters) may impersonate anyone: `kubectl
// auth can-i list pods -n bob --as alice` is how to check a student's
// rights without their credential.

// Impersonation headers, as Kubernetes names them.
const (
	headerImpersonateUser        = "Impersonate-User"
	headerImpersonateGroup       = "Impersonate-Group"
	headerImpersonateUID         = "Impersonate-Uid"
	headerImpersonateExtraPrefix = "Impersonate-Extra-"
)

// impersonate returns the user r acts as: u itself without impersonation
// headers; the impersonated user when u may impersonate it; or the error
// to answer (403 in Kubernetes' words, 400 for headers that make no
// sense). It removes the headers from r.
func (s *Server) impersonate(r *http.Request, u User) (User, error) {
	name := r.Header.Get(headerImpersonateUser)
	groups := r.Header.Values(headerImpersonateGroup)
	uid := r.Header.Get(headerImpersonateUID)
	var extras []string
	for k := range r.Header {
		if strings.HasPrefix(k, headerImpersonateExtraPrefix) {
			extras = append(extras, k)
		}
	}
	if name == "" && len(groups) == 0 && uid == "" && len(extras) == 0 {
		return u, nil
	}
	defer func() {
		r.Header.Del(headerImpersonateUser)
		r.Header.Del(headerImpersonateGroup)
		r.Header.Del(headerImpersonateUID)
		for _, k := range extras {
			r.Header.Del(k)
		}
	}()
	if name == "" {
		return User{}, api.NewBadRequest("requested impersonation of groups, a uid or extra fields without impersonating a user (give Impersonate-User)")
	}
	check := func(a attributes) error {
		a.user, a.verb, a.resourceRequest = u, "impersonate", true
		ok, reason, err := s.authorize(r.Context(), a)
		if err != nil {
			return err
		}
		if !ok {
			return forbiddenError(a, reason)
		}
		return nil
	}
	var out User
	if ns, sa, ok := serviceAccountOf(User{Name: name}); ok {
		if err := check(attributes{resource: "serviceaccounts", namespace: ns, name: sa}); err != nil {
			return User{}, err
		}
		if len(groups) == 0 {
			groups = []string{ServiceAccountsGroup, ServiceAccountsGroup + ":" + ns}
		}
	} else if err := check(attributes{resource: "users", name: name}); err != nil {
		return User{}, err
	}
	out.Name = name
	for _, g := range groups {
		if err := check(attributes{resource: "groups", name: g}); err != nil {
			return User{}, err
		}
	}
	if uid != "" {
		if err := check(attributes{group: "authentication.k8s.io", resource: "uids", name: uid}); err != nil {
			return User{}, err
		}
		out.UID = uid
	}
	for _, k := range extras {
		key := strings.ToLower(strings.TrimPrefix(k, headerImpersonateExtraPrefix))
		for _, v := range r.Header.Values(k) {
			if err := check(attributes{group: "authentication.k8s.io", resource: "userextras", sub: key, name: v}); err != nil {
				return User{}, err
			}
		}
	}
	out.Groups = slices.Clone(groups)
	s.log.Debug("impersonating", "user", u.Name, "as", out.Name, "groups", out.Groups)
	return withAuthenticated(out), nil
}
