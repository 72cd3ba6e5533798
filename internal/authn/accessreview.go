package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// accessReviewer asks the API server whether a caller may do something,
// the kubelet's authorization mode Webhook. Answers are kept, allowed ones
// for allowTTL and the others for denyTTL (shorter, so that a permission
// just granted takes effect soon); failures are not kept.
type accessReviewer struct {
	reviews authorizationv1client.SubjectAccessReviewInterface
	// cache maps a review's spec, as JSON, to its status.
	cache             *cache.LRUExpireCache
	allowTTL, denyTTL time.Duration
	backoff           wait.Backoff
}

func newAccessReviewer(reviews authorizationv1client.SubjectAccessReviewInterface, allowTTL, denyTTL time.Duration,
	clk cache.Clock, backoff wait.Backoff) *accessReviewer {
	return &accessReviewer{
		reviews:  reviews,
		cache:    cache.NewLRUExpireCacheWithClock(accessCacheSize, clk),
		allowTTL: allowTTL,
		denyTTL:  denyTTL,
		backoff:  backoff,
	}
}

// allowed reports whether u may do what attrs describe, and the API
// server's reason. An error means there is no answer: the API server
// could not be asked, or contradicted itself.
func (a *accessReviewer) allowed(ctx context.Context, u User, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs,
		User:               u.Name,
		UID:                u.UID,
		Groups:             u.Groups,
	}
	if len(u.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	// The whole spec is the key, as in the API server's webhook
	// authorizer: the same user asking the same thing.
	keyJSON, err := json.Marshal(spec)
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	key := string(keyJSON)
	st, cached := a.lookup(key)
	if !cached {
		if st, err = a.ask(ctx, spec); err != nil {
			return false, "", err
		}
		ttl := a.denyTTL
		if st.Allowed {
			ttl = a.allowTTL
		}
		a.cache.Add(key, st, ttl)
	}
	if st.Allowed && st.Denied {
		return false, st.Reason, errors.New("SubjectAccessReview: the API server answered both allowed and denied")
	}
	// Neither allowed nor denied is no opinion, and there is no other
	// authorizer to ask: not allowed.
	return st.Allowed, st.Reason, nil
}

func (a *accessReviewer) lookup(key string) (authorizationv1.SubjectAccessReviewStatus, bool) {
	v, ok := a.cache.Get(key)
	if !ok {
		return authorizationv1.SubjectAccessReviewStatus{}, false
	}
	return v.(authorizationv1.SubjectAccessReviewStatus), true
}

func (a *accessReviewer) ask(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	req := &authorizationv1.SubjectAccessReview{Spec: spec}
	var resp *authorizationv1.SubjectAccessReview
	err := withRetries(ctx, a.backoff, func(ctx context.Context) error {
		var err error
		resp, err = a.reviews.Create(ctx, req, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return resp.Status, nil
}
