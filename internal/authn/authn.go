// Package authn says who is calling berth's secure API: a client
// certificate signed by the configured CA, or a bearer token from the token
// file. There is no anonymous caller: a request neither identifies is
// refused with 401 before any handler runs. Every authenticated caller may
// do everything (the kubelet's AlwaysAllow); the identity is what requests
// are logged with.
package authn

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Method is how the caller proved who it is: "x509" or "token".
	Method string
}

// Authenticator checks the credentials of a request.
type Authenticator struct {
	// x509 trusts the TLS layer: the server verified the client's chain
	// against the CA bundle before the request reached us.
	x509   bool
	tokens map[[sha256.Size]byte]User
}

// New returns an authenticator that accepts verified client certificates
// when x509 is set and the bearer tokens of tokens (may be nil).
func New(x509 bool, tokens *Tokens) *Authenticator {
	a := &Authenticator{x509: x509}
	if tokens != nil {
		a.tokens = tokens.users
	}
	return a
}

// Authenticate returns the caller of r, or false.
func (a *Authenticator) Authenticate(r *http.Request) (User, bool) {
	if a.x509 && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		subject := r.TLS.VerifiedChains[0][0].Subject
		if subject.CommonName != "" {
			return User{Name: subject.CommonName, Groups: subject.Organization, Method: "x509"}, true
		}
	}
	if token, ok := bearer(r.Header.Get("Authorization")); ok && a.tokens != nil {
		// Looked up by digest: a map probe's timing says nothing useful
		// about the token itself.
		if u, ok := a.tokens[sha256.Sum256([]byte(token))]; ok {
			return u, true
		}
	}
	return User{}, false
}

// bearer extracts the token of an "Authorization: Bearer" header.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Require serves next only to authenticated callers, with the caller in
// the request's context; everyone else gets 401 and nothing runs.
func (a *Authenticator) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.Authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
	})
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the caller Require put in ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
