package authn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// allAuthenticated is the group the API server gives every authenticated
// user (k8s.io/apiserver's user.AllAuthenticated); RBAC bindings to it
// must hold for the node's callers too.
const allAuthenticated = "system:authenticated"

// Config is how the secure API knows its callers and what they may do:
// the kubelet's authentication and authorization settings, resolved.
type Config struct {
	// NodeName is the node object requests are authorized against.
	NodeName string
	// ClientCertificates trusts client certificates that the TLS layer
	// verified against the client CA (authentication.x509.clientCAFile):
	// the user is the subject's CN, the groups its O.
	ClientCertificates bool
	// Tokens are the bearer tokens of the token file; nil for none.
	Tokens *Tokens
	// TokenWebhook asks the API server about bearer tokens that are not
	// in the token file (authentication.webhook.enabled), keeping each
	// answer for TokenWebhookCacheTTL (cacheTTL).
	TokenWebhook         bool
	TokenWebhookCacheTTL time.Duration
	// AuthorizationMode is AlwaysAllow (every authenticated caller may do
	// everything) or Webhook (a SubjectAccessReview per request, allowed
	// answers kept for AuthorizedTTL and the others for UnauthorizedTTL).
	AuthorizationMode kubeletconfigv1beta1.KubeletAuthorizationMode
	AuthorizedTTL     time.Duration
	UnauthorizedTTL   time.Duration
}

// Gate lets a request reach the secure API's handlers only if its caller
// is known (else 401) and, in Webhook mode, allowed by the API server
// (else 403, or 500 when the API server could not say).
type Gate struct {
	local *Authenticator
	// tokens and access are nil unless their webhook is on.
	tokens   *tokenReviewer
	access   *accessReviewer
	nodeName string
	log      *slog.Logger
}

// NewGate returns the gate cfg describes. client reaches the API server
// for the webhooks; it may be nil when neither is on. A nil logger
// discards.
func NewGate(client kubernetes.Interface, cfg Config, log *slog.Logger) (*Gate, error) {
	return newGate(client, cfg, log, clock.RealClock{}, defaultBackoff())
}

func newGate(client kubernetes.Interface, cfg Config, log *slog.Logger, clk cache.Clock, backoff wait.Backoff) (*Gate, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if cfg.TokenWebhook && client == nil {
		errs = append(errs, errors.New("token webhook authentication asks the API server, and there is no client for one"))
	}
	if !cfg.ClientCertificates && cfg.Tokens == nil && !cfg.TokenWebhook {
		errs = append(errs, errors.New("no way to authenticate callers: trust client certificates, give a token file or turn the token webhook on"))
	}
	switch cfg.AuthorizationMode {
	case kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow:
	case kubeletconfigv1beta1.KubeletAuthorizationModeWebhook:
		if client == nil {
			errs = append(errs, errors.New("authorization mode Webhook asks the API server, and there is no client for one"))
		}
	default:
		errs = append(errs, fmt.Errorf("authorization mode %q: want %s or %s", cfg.AuthorizationMode,
			kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook))
	}
	for _, ttl := range []time.Duration{cfg.TokenWebhookCacheTTL, cfg.AuthorizedTTL, cfg.UnauthorizedTTL} {
		if ttl < 0 {
			errs = append(errs, fmt.Errorf("cache TTL %s is negative", ttl))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("secure API authentication and authorization: %w", err)
	}
	g := &Gate{local: New(cfg.ClientCertificates, cfg.Tokens), nodeName: cfg.NodeName, log: log}
	if cfg.TokenWebhook {
		g.tokens = newTokenReviewer(client.AuthenticationV1().TokenReviews(), cfg.TokenWebhookCacheTTL, clk, backoff)
	}
	if cfg.AuthorizationMode == kubeletconfigv1beta1.KubeletAuthorizationModeWebhook {
		g.access = newAccessReviewer(client.AuthorizationV1().SubjectAccessReviews(),
			cfg.AuthorizedTTL, cfg.UnauthorizedTTL, clk, backoff)
	}
	return g, nil
}

// Require serves next only to the callers the gate lets through, with the
// caller in the request's context; nothing of next runs for the others.
func (g *Gate) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := g.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		recordCaller(r.Context(), u)
		if g.access != nil && !g.authorize(w, r, u) {
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
	})
}

// authenticate tries what berth knows itself first, then the API server.
func (g *Gate) authenticate(r *http.Request) (User, bool) {
	if u, ok := g.local.Authenticate(r); ok {
		return withAllAuthenticated(u), true
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok || g.tokens == nil {
		return User{}, false
	}
	v, err := g.tokens.review(r.Context(), token)
	switch {
	case err != nil:
		// An outage or a misconfiguration, not a bad caller.
		g.log.Warn("could not check a bearer token with the API server", "remote", r.RemoteAddr, "err", err)
		return User{}, false
	case !v.ok:
		g.log.Debug("the API server did not accept a bearer token", "remote", r.RemoteAddr, "reason", v.reason)
		return User{}, false
	}
	return withAllAuthenticated(v.user), true
}

// authorize asks about each of the request's attributes until one is
// allowed, and answers the request itself when none is, in the kubelet's
// words.
func (g *Gate) authorize(w http.ResponseWriter, r *http.Request, u User) bool {
	attrs := RequestAttributes(g.nodeName, r.Method, r.URL.Path)
	subresources := make([]string, len(attrs))
	for i, a := range attrs {
		subresources[i] = a.Subresource
	}
	var reasons []string
	for _, a := range attrs {
		if a.Verb == "" {
			// A method with no verb: nothing could allow it, so the API
			// server is not asked.
			reasons = append(reasons, "no API verb for method "+r.Method)
			break
		}
		ok, reason, err := g.access.allowed(r.Context(), u, a)
		if err != nil {
			g.log.Warn("could not authorize a request with the API server", "user", u.Name,
				"verb", a.Verb, "resource", a.Resource, "subresource", a.Subresource, "err", err)
			http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
				u.Name, a.Verb, a.Resource, a.Subresource), http.StatusInternalServerError)
			return false
		}
		if ok {
			return true
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	g.log.Debug("forbidden", "user", u.Name, "verb", attrs[0].Verb, "resource", attrs[0].Resource,
		"subresources", subresources, "reasons", reasons)
	http.Error(w, forbiddenMessage(u, attrs[0], subresources), http.StatusForbidden)
	return false
}

// forbiddenMessage is the kubelet's 403 text, so that what kubectl shows
// reads the same: "Forbidden (user=alice, verb=get, resource=nodes,
// subresource(s)=[pods proxy])".
func forbiddenMessage(u User, a authorizationv1.ResourceAttributes, subresources []string) string {
	return fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)", u.Name, a.Verb, a.Resource, subresources)
}

// withAllAuthenticated returns u in the group every authenticated user is
// in, with a slice of its own: u's may be a cached verdict's.
func withAllAuthenticated(u User) User {
	groups := slices.Clone(u.Groups)
	if !slices.Contains(groups, allAuthenticated) {
		groups = append(groups, allAuthenticated)
	}
	u.Groups = groups
	return u
}
