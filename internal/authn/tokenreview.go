package authn

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// tokenReviewer asks the API server who a bearer token belongs to, the
// kubelet's authentication.webhook, and keeps each answer for ttl: a
// caller such as metrics-server presents the same token on every scrape.
type tokenReviewer struct {
	reviews authenticationv1client.TokenReviewInterface
	// cache maps a token's digest, never the token, to its tokenVerdict.
	cache   *cache.LRUExpireCache
	ttl     time.Duration
	backoff wait.Backoff
}

// tokenVerdict is the API server's answer about one token.
type tokenVerdict struct {
	user User
	ok   bool
	// reason is why a token was not accepted, when the API server said.
	reason string
}

func newTokenReviewer(reviews authenticationv1client.TokenReviewInterface, ttl time.Duration,
	clk cache.Clock, backoff wait.Backoff) *tokenReviewer {
	return &tokenReviewer{
		reviews: reviews,
		cache:   cache.NewLRUExpireCacheWithClock(tokenCacheSize, clk),
		ttl:     ttl,
		backoff: backoff,
	}
}

// review returns the API server's verdict on token. An error means the
// API server could not be asked; it is not kept, so the next request asks
// again.
func (t *tokenReviewer) review(ctx context.Context, token string) (tokenVerdict, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := t.cache.Get(key); ok {
		return v.(tokenVerdict), nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	// No audiences: the API server checks the token against its own, as
	// it does for the kubelet.
	req := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	var resp *authenticationv1.TokenReview
	err := withRetries(ctx, t.backoff, func(ctx context.Context) error {
		var err error
		resp, err = t.reviews.Create(ctx, req, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return tokenVerdict{}, fmt.Errorf("TokenReview: %w", err)
	}
	st := resp.Status
	if !st.Authenticated {
		v := tokenVerdict{reason: st.Error}
		// The API server's token cache keeps a rejection only when it
		// came without an error, and so does this one.
		if st.Error == "" {
			t.cache.Add(key, v, t.ttl)
		}
		return v, nil
	}
	v := tokenVerdict{ok: true, user: User{
		Name:   st.User.Username,
		UID:    st.User.UID,
		Groups: st.User.Groups,
		Method: "webhook",
	}}
	if len(st.User.Extra) > 0 {
		v.user.Extra = make(map[string][]string, len(st.User.Extra))
		for k, vals := range st.User.Extra {
			v.user.Extra[k] = append([]string(nil), vals...)
		}
	}
	t.cache.Add(key, v, t.ttl)
	return v, nil
}
