// Package podobjects is how berth reads the API objects its pods refer to
// (configMaps, secrets, service account tokens) when it runs as a Node of a
// cluster. On a standalone node there is no such source: the Source is nil
// and whatever needs one is refused by name.
//
// The Node authorizer lets a node GET only the configMaps and secrets of
// pods bound to it, never list or watch a namespace, so objects are read one
// by one and kept for a short TTL, like the kubelet's "Cache" change
// detection strategy (pkg/kubelet/util/manager): pods referring to the same
// object share one read, and a change reaches pods within the TTL plus the
// pod worker's resync.
//
// Services, which containers' environment needs, are the exception: nodes
// may list and watch them all, so Services keeps them by a watch.
package podobjects

import (
	"context"
	"log/slog"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/apiutil"
	"github.com/berth-dev/berth/internal/token"
)

// Source reads the objects a pod refers to. The objects returned are shared
// with other callers and must not be modified. A configMap or secret that
// does not exist is an error for which apierrors.IsNotFound is true, worded
// as the kubelet words it: `configmap "x" not found`.
type Source interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// GetServiceAccountToken returns a token of service account
	// namespace/name as tr asks, renewed before it expires
	// (token.Manager).
	GetServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

const (
	// DefaultTTL is how long a configMap or secret read is reused.
	DefaultTTL = 10 * time.Second
	// DefaultTimeout bounds each call to the API server.
	DefaultTimeout = 10 * time.Second
)

// Options tune a Client; the zero value takes the defaults.
type Options struct {
	// TTL is how long a configMap or secret read is reused (DefaultTTL).
	TTL time.Duration
	// Timeout bounds each call to the API server (DefaultTimeout).
	Timeout time.Duration
	// Clock times the cache and the tokens' renewal (the real clock).
	Clock clock.PassiveClock
	// Log receives failed token renewals (slog.Default()).
	Log *slog.Logger
}

// Client is the Source of a cluster node, over a clientset.
type Client struct {
	configMaps *cache[*v1.ConfigMap]
	secrets    *cache[*v1.Secret]
	tokens     *token.Manager
}

var _ Source = (*Client)(nil)

// New returns the Source that reads through client, with the node's
// credentials.
func New(client kubernetes.Interface, opts Options) *Client {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	timeout := opts.Timeout
	return &Client{
		configMaps: newCache(opts.TTL, opts.Clock, func(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			return cm, apiutil.Explain(kubeletNotFound(err, "configmap", name), "get", "configmaps")
		}),
		secrets: newCache(opts.TTL, opts.Clock, func(ctx context.Context, ns, name string) (*v1.Secret, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			s, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			return s, apiutil.Explain(kubeletNotFound(err, "secret", name), "get", "secrets")
		}),
		tokens: token.NewManager(token.ClientRequest(client, timeout), opts.Clock, opts.Log),
	}
}

// GetConfigMap returns configMap namespace/name, read at most TTL ago.
func (c *Client) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return c.configMaps.get(ctx, namespace, name)
}

// GetSecret returns secret namespace/name, read at most TTL ago.
func (c *Client) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return c.secrets.get(ctx, namespace, name)
}

// GetServiceAccountToken implements Source.
func (c *Client) GetServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return c.tokens.GetServiceAccountToken(ctx, namespace, name, tr)
}

// kubeletNotFound rewords the API server's `configmaps "x" not found` as the
// kubelet's object managers do (`configmap "x" not found`), which is what
// users see in FailedMount and CreateContainerConfigError messages.
func kubeletNotFound(err error, resource, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
	}
	return err
}
