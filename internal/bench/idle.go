package bench

import (
	"context"
	"time"
)

// IdleResult is what a node costs with no pods at all: the agent's own
// loops (relist, housekeeping, GCs, its API) and its runtime's.
type IdleResult struct {
	WindowSeconds float64 `json:"window_seconds"`
	Berth         Usage   `json:"berth"` // the agent's
	Containerd    Usage   `json:"containerd"`
}

// idleWarmUp lets a fresh node finish starting (image imports, the first
// relists, housekeeping and GCs) before the idle window opens: that is
// start-up, not idling.
const idleWarmUp = 15 * time.Second

// runIdle measures the node, which must have no pods, over window after
// the warm-up.
func runIdle(ctx context.Context, n nodeUnderTest, window time.Duration) (IdleResult, error) {
	res := IdleResult{}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(idleWarmUp):
	}
	meter, err := newNodeMeter(n)
	if err != nil {
		return res, err
	}
	meter.sampleEvery(ctx, sampleEvery, window)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.WindowSeconds = round3(time.Since(meter.start).Seconds())
	res.Berth, res.Containerd = meter.usage(0), meter.usage(1)
	return res, nil
}
