package agent

import (
	"context"
	"errors"
	"fmt"
)

// stopping marks an error of a start-up that ctx's end cut short (a CRI
// call cancelled by SIGTERM) as that end's consequence, so that berth
// exits as from any stop it was asked for, without an error.
func stopping(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}
