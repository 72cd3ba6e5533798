// Package token caches the service account tokens of the pods on the node
// and renews them before they expire, with the kubelet's semantics
// (pkg/kubelet/token): one token per service account, audiences, lifetime
// and bound pod; renewed once it is older than 80% of its lifetime or than
// 24 hours; a failed renewal keeps serving the old token while it is valid.
package token

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/apiutil"
)

const (
	// maxTTL renews even a long-lived token daily.
	maxTTL = 24 * time.Hour
	// maxJitter spreads the renewals of tokens issued together.
	maxJitter = 10 * time.Second
	// gcPeriod is how often expired tokens are dropped from the cache.
	gcPeriod = time.Minute
)

// RequestFunc asks the API server for a token of service account
// namespace/name (TokenRequest API).
type RequestFunc func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// ClientRequest is the RequestFunc of a clientset, each call bounded by
// timeout.
func ClientRequest(c kubernetes.Interface, timeout time.Duration) RequestFunc {
	return func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		out, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		return out, apiutil.Explain(err, "create", "serviceaccounts/token")
	}
}

// Manager is the token cache. It is safe for concurrent use.
type Manager struct {
	request RequestFunc
	clock   clock.PassiveClock
	log     *slog.Logger
	// jitter is drawn at each check, as in the kubelet; tests fix it.
	jitter func() time.Duration

	mu     sync.Mutex
	cache  map[string]*authenticationv1.TokenRequest
	lastGC time.Time
}

// NewManager returns an empty cache that asks request for tokens.
func NewManager(request RequestFunc, clk clock.PassiveClock, log *slog.Logger) *Manager {
	return &Manager{
		request: request,
		clock:   clk,
		log:     log,
		jitter: func() time.Duration {
			// Whole seconds, as the kubelet draws them.
			return time.Duration(rand.N(int64(maxJitter/time.Second))) * time.Second
		},
		cache: map[string]*authenticationv1.TokenRequest{},
	}
}

// GetServiceAccountToken returns a valid token for service account
// namespace/name as tr asks (audiences, lifetime, bound object): the cached
// one unless it is due for renewal, else a new one. When a renewal fails,
// the old token is returned while it has not expired.
func (m *Manager) GetServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := keyFunc(namespace, name, tr)
	now := m.clock.Now()
	cached, ok := m.get(key, now)
	if ok && !RequiresRefresh(now, cached, m.jitter()) {
		return cached, nil
	}
	fresh, err := m.request(ctx, namespace, name, tr)
	if err != nil {
		switch {
		case !ok:
			return nil, fmt.Errorf("failed to fetch token: %w", err)
		case expired(m.clock.Now(), cached):
			return nil, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
		}
		m.log.Warn("renewing a service account token failed; the current one is still valid", "key", key, "err", err)
		return cached, nil
	}
	m.mu.Lock()
	m.cache[key] = fresh
	m.mu.Unlock()
	return fresh, nil
}

// DeleteServiceAccountToken forgets the tokens bound to a pod that is gone.
func (m *Manager) DeleteServiceAccountToken(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tr := range m.cache {
		if ref := tr.Spec.BoundObjectRef; ref != nil && ref.UID == podUID {
			delete(m.cache, k)
		}
	}
}

// get returns the cached token for key, first dropping expired tokens if
// that was not done for gcPeriod: the tokens of deleted pods go that way.
func (m *Manager) get(key string, now time.Time) (*authenticationv1.TokenRequest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastGC) >= gcPeriod {
		m.lastGC = now
		for k, tr := range m.cache {
			if expired(now, tr) {
				delete(m.cache, k)
			}
		}
	}
	tr, ok := m.cache[key]
	return tr, ok
}

func expired(now time.Time, tr *authenticationv1.TokenRequest) bool {
	return now.After(tr.Status.ExpirationTimestamp.Time)
}

// RequiresRefresh reports whether tr is due for renewal at now: older than
// maxTTL less jitter, or within 20% of its lifetime plus jitter of its
// expiry. A token whose lifetime is unknown is never renewed early (the
// kubelet logs that as an error; the API server always sets it).
func RequiresRefresh(now time.Time, tr *authenticationv1.TokenRequest, jitter time.Duration) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	lifetime := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-lifetime)
	if now.After(issued.Add(maxTTL - jitter)) {
		return true
	}
	// The kubelet computes 20% in whole seconds.
	margin := time.Duration(*tr.Spec.ExpirationSeconds*20/100) * time.Second
	return now.After(exp.Add(-margin - jitter))
}

// keyFunc names a token request; it holds nothing secret, so it may be
// logged.
func keyFunc(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if tr.Spec.BoundObjectRef != nil {
		ref = *tr.Spec.BoundObjectRef
	}
	// The request's UID, when set, is a precondition on the service
	// account: a token of a deleted and recreated account must not be
	// served for the new one.
	return fmt.Sprintf("%q/%q/%#v/%d/%#v/%q", name, namespace, tr.Spec.Audiences, exp, ref, tr.UID)
}
