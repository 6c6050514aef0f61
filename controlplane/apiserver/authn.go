package apiserver

import (
	"context"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"skiff.dev/skiff/pki"
)

// Names of the identities skiff knows, as Kubernetes spells them.
const (
	// AdminUser is the user of the admin bearer token (Config.Token).
	AdminUser = "skiff-admin"
	// AuthenticatedGroup holds every authenticated user.
	AuthenticatedGroup = "system:authenticated"
	// ServiceAccountUserPrefix + "NS:NAME" is a service account's user.
	ServiceAccountUserPrefix = "system:serviceaccount:"
	// ServiceAccountsGroup holds every service account;
	// ServiceAccountsGroup + ":" + NS those of one namespace.
	ServiceAccountsGroup = "system:serviceaccounts"
)

// User is who a request comes from, as Kubernetes' user.Info: the name,
// a UID (empty for the admin token and certificates) and the groups.
type User struct {
	Name, UID string
	Groups    []string
}

// InGroup reports whether u is a member of group.
func (u User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// TokenAuthenticator checks a bearer token that is not the admin token,
// as Kubernetes' authenticator.Token: ok false (and no error) means "not
// mine", so the next authenticator is asked; an error means the token was
// recognized but is bad (expired, revoked, its object gone), and the
// request is refused with 401.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (User, bool, error)
}

type userKey struct{}

// WithUser returns ctx carrying u (the server sets it for every
// authenticated request; tests and Local use it directly).
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// WithoutUser returns ctx with no user: what the control plane does on
// its own behalf inside a request (the dashboard finding which
// namespaces exist before it asks, as the user, what it may show).
func WithoutUser(ctx context.Context) context.Context {
	return context.WithValue(ctx, userKey{}, nil)
}

// UserFrom returns the user of a request's context.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// adminGroups are the admin token's user's groups, shared by every request
// of it: nothing changes a User's Groups in place (withAuthenticated and
// impersonation make new slices), and the slice is clipped, so an append
// copies.
var adminGroups = slices.Clip([]string{pki.MastersGroup, AuthenticatedGroup})

// adminUser is the admin token's user.
func adminUser() User {
	return User{Name: AdminUser, Groups: adminGroups}
}

// BearerToken reads the Authorization header as Kubernetes' bearertoken
// authenticator reads it: the scheme in any case ("Bearer", "bearer"), one
// space, the token up to the next space. It is the one parser of bearer
// tokens (the API server's and the bootstrap API's join token).
func BearerToken(r *http.Request) (string, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// authenticate finds the request's user: a bearer token (the admin token,
// compared in constant time, then each Config.TokenAuthenticators in
// turn), else a TLS client certificate that verified against the cluster
// CA (CN the user, O the groups, as Kubernetes' x509 authenticator). A
// The web dashboard's session cookie is not read here: Config.Dashboard
// serves its paths before authentication, checks the cookie itself and
// puts the session's user (the system:masters user who asked for the
// one-time code, with a bearer token or certificate checked here) on the
// context of its reads (WithUser). A
// bearer token that nobody recognizes is refused even when a certificate
// is also presented, as kube-apiserver's union authenticator does for a
// token that fails: the client meant the token.
func (s *Server) authenticate(r *http.Request) (User, bool) {
	if tok, ok := BearerToken(r); ok {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1 {
			return adminUser(), true
		}
		for _, a := range s.cfg.TokenAuthenticators {
			u, ok, err := a.AuthenticateToken(r.Context(), tok)
			if err != nil {
				s.log.Debug("token refused", "remote", r.RemoteAddr, "err", err)
				return User{}, false
			}
			if ok {
				return withAuthenticated(u), true
			}
		}
		return User{}, false
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		if c.Subject.CommonName == "" {
			return User{}, false
		}
		groups := slices.Clone(c.Subject.Organization)
		return withAuthenticated(User{Name: c.Subject.CommonName, Groups: groups}), true
	}
	return User{}, false
}

// withAuthenticated adds system:authenticated to u's groups once.
func withAuthenticated(u User) User {
	if !u.InGroup(AuthenticatedGroup) {
		u.Groups = append(slices.Clone(u.Groups), AuthenticatedGroup)
	}
	return u
}
