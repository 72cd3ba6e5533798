package authn

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// reviewTimeout bounds one question to the API server, retries
	// included, so that a hung API server costs a caller an error rather
	// than a connection held forever.
	reviewTimeout = 10 * time.Second
	// Cache sizes: the API server's webhook authorizer keeps 8192 answers;
	// a node sees far fewer distinct callers.
	tokenCacheSize  = 1024
	accessCacheSize = 8192
)

// defaultBackoff is the kubelet's retry schedule for its webhooks
// (k8s.io/apiserver's DefaultAuthWebhookRetryBackoff): 5 tries over about
// 4 seconds.
func defaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// withRetries calls call until it succeeds, fails for good, or the backoff
// is spent, and returns its last error. Only failures that say the API
// server may answer later are retried, as the API server's own webhook
// clients decide (k8s.io/apiserver/pkg/util/webhook.DefaultShouldRetry).
func withRetries(ctx context.Context, backoff wait.Backoff, call func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = call(ctx)
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		}
		return false, last
	})
	if last != nil {
		return last
	}
	return err
}

func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}
