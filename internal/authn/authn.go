// Package authn guards berth's secure API as the kubelet guards its port
// 10250: who is calling, and whether they may.
//
// A caller is authenticated by a client certificate signed by the
// configured CA, by a bearer token from the token file, or, in a cluster,
// by a bearer token the API server vouches for (TokenReview). There is no
// anonymous caller: a request nobody identifies is refused with 401 before
// any handler runs. Authorization is the kubelet's AlwaysAllow (every
// authenticated caller may do everything) or Webhook, which asks the API
// server with a SubjectAccessReview about the node's subresource the path
// maps to (RequestAttributes). Gate puts both in front of the handlers;
// the identity is what requests are logged with.
package authn

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strings"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra is what the API server's TokenReview said besides, passed on
	// in SubjectAccessReviews as the kubelet does.
	Extra map[string][]string
	// Method is how the caller proved who it is: "x509", "token" (the
	// token file) or "webhook" (a token the API server reviewed).
	Method string
}

// Authenticator checks the credentials berth holds itself: client
// certificates and the token file.
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

// Require serves next only to authenticated callers, each of whom may do
// everything (AlwaysAllow); everyone else gets 401 and nothing runs.
func (a *Authenticator) Require(next http.Handler) http.Handler {
	return (&Gate{local: a, log: slog.New(slog.DiscardHandler)}).Require(next)
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

// Caller is where Require leaves the caller it identified for middleware
// wrapped around it, which never sees the request Require hands on: the
// request log. It is filled before authorization, so a refused request
// is logged with its user too.
type Caller struct {
	User  User
	Known bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c for Require to fill.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func recordCaller(ctx context.Context, u User) {
	if c, ok := ctx.Value(callerKey{}).(*Caller); ok {
		c.User, c.Known = u, true
	}
}
