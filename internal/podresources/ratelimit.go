package podresources

import (
	"context"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// The kubelet's own limits for this API (its podresources DefaultQPS and
// DefaultBurstTokens): no known consumer needs more than 100 calls a second,
// and a client polling in a tight loop must not starve the node agent.
const (
	defaultQPS         = 100
	defaultBurstTokens = 10
)

// rateLimit rejects calls beyond limiter's rate with ResourceExhausted and
// the kubelet's message, instead of queueing them: a client over its budget
// should back off, not pile up. Time comes from clk so tests can step it.
func rateLimit(limiter *rate.Limiter, clk clock.PassiveClock) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !limiter.AllowN(clk.Now(), 1) {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return handler(ctx, req)
	}
}
