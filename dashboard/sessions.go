package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"skiff.dev/skiff/controlplane/apiserver"
)

// Defaults of Sessions.
const (
	// CodeTTL: a login URL is opened within seconds of being printed; two
	// minutes forgive a slow copy and paste, and a leaked old URL is dead.
	CodeTTL = 2 * time.Minute
	// SessionTTL: a teaching day.
	SessionTTL = 8 * time.Hour
	// maxPending bounds the unused codes and live sessions, so a client
	// that asks in a loop cannot grow the maps without bound.
	maxPending = 1024
)

// ErrTooMany is returned when maxPending codes (or sessions) are live.
var ErrTooMany = errors.New("too many live dashboard logins; wait for some to expire")

// Sessions holds the one-time login codes and the sessions they turned
// into. Both are kept in memory by their SHA-256 (the secret itself is
// never stored), with an expiry. Safe for concurrent use.
type Sessions struct {
	// Now is the clock (tests set it).
	Now func() time.Time
	// CodeTTL and SessionTTL: see the constants.
	CodeTTL, SessionTTL time.Duration

	mu       sync.Mutex
	codes    map[[32]byte]pendingLogin
	sessions map[[32]byte]session
}

type pendingLogin struct {
	user    apiserver.User
	view    string
	expires time.Time
}

type session struct {
	user    apiserver.User
	expires time.Time
}

// NewSessions returns an empty set with the default lifetimes.
func NewSessions() *Sessions {
	return &Sessions{Now: time.Now, CodeTTL: CodeTTL, SessionTTL: SessionTTL,
		codes: map[[32]byte]pendingLogin{}, sessions: map[[32]byte]session{}}
}

// NewCode returns a one-time code that logs in as u and lands on view
// (a fragment such as "chain/default/gpu-test"; "" is the cluster view).
func (s *Sessions) NewCode(u apiserver.User, view string) (code string, expires time.Time, err error) {
	code, err = randomSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	s.pruneLocked(now)
	if len(s.codes) >= maxPending {
		return "", time.Time{}, ErrTooMany
	}
	expires = now.Add(s.CodeTTL)
	s.codes[sha256.Sum256([]byte(code))] = pendingLogin{user: u, view: view, expires: expires}
	return code, expires, nil
}

// Exchange turns a code into a session, once: the code is gone after the
// first call whatever its outcome. ok is false for an unknown, used or
// expired code.
func (s *Sessions) Exchange(code string) (id, view string, expires time.Time, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha256.Sum256([]byte(code))
	p, found := s.codes[h]
	delete(s.codes, h)
	now := s.Now()
	if !found || !now.Before(p.expires) {
		return "", "", time.Time{}, false, nil
	}
	s.pruneLocked(now)
	if len(s.sessions) >= maxPending {
		return "", "", time.Time{}, false, ErrTooMany
	}
	if id, err = randomSecret(); err != nil {
		return "", "", time.Time{}, false, err
	}
	expires = now.Add(s.SessionTTL)
	s.sessions[sha256.Sum256([]byte(id))] = session{user: p.user, expires: expires}
	return id, p.view, expires, true, nil
}

// User returns the user of a live session.
func (s *Sessions) User(id string) (apiserver.User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha256.Sum256([]byte(id))
	se, ok := s.sessions[h]
	if !ok {
		return apiserver.User{}, false
	}
	if !s.Now().Before(se.expires) {
		delete(s.sessions, h)
		return apiserver.User{}, false
	}
	return se.user, true
}

// End forgets a session (logout).
func (s *Sessions) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sha256.Sum256([]byte(id)))
}

func (s *Sessions) pruneLocked(now time.Time) {
	for h, p := range s.codes {
		if !now.Before(p.expires) {
			delete(s.codes, h)
		}
	}
	for h, se := range s.sessions {
		if !now.Before(se.expires) {
			delete(s.sessions, h)
		}
	}
}

// randomSecret is 256 random bits, base64url without padding.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
