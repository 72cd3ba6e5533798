package podresources

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"
)

func TestRateLimit(t *testing.T) {
	tests := []struct {
		name string
		// step is how far the clock moves before each call.
		step     []time.Duration
		wantPass []bool
	}{
		{
			name:     "a burst is served whole",
			step:     repeat(0, defaultBurstTokens),
			wantPass: repeatBool(true, defaultBurstTokens),
		},
		{
			name:     "the call past the burst is rejected",
			step:     repeat(0, defaultBurstTokens+1),
			wantPass: append(repeatBool(true, defaultBurstTokens), false),
		},
		{
			name:     "one token comes back every 1/QPS",
			step:     append(repeat(0, defaultBurstTokens+1), time.Second/defaultQPS, 0),
			wantPass: append(repeatBool(true, defaultBurstTokens), false, true, false),
		},
		{
			name:     "a steady client at the QPS is never rejected",
			step:     repeat(time.Second/defaultQPS, 3*defaultBurstTokens),
			wantPass: repeatBool(true, 3*defaultBurstTokens),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(time.Unix(1_000_000, 0))
			intercept := rateLimit(rate.NewLimiter(defaultQPS, defaultBurstTokens), clk)
			handled := 0
			handler := func(context.Context, any) (any, error) {
				handled++
				return "ok", nil
			}
			for i, step := range tt.step {
				clk.SetTime(clk.Now().Add(step))
				before := handled
				resp, err := intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/v1.PodResourcesLister/List"}, handler)
				passed := handled > before
				if passed != tt.wantPass[i] {
					t.Fatalf("call %d: handled = %v, want %v (err %v)", i, passed, tt.wantPass[i], err)
				}
				if passed && (err != nil || resp != "ok") {
					t.Fatalf("call %d: got %v, %v; want the handler's answer", i, resp, err)
				}
				if !passed && status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("call %d: err = %v, want ResourceExhausted", i, err)
				}
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration { return slices.Repeat([]time.Duration{d}, n) }

func repeatBool(b bool, n int) []bool { return slices.Repeat([]bool{b}, n) }
