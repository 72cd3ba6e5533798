package agent

import (
	"context"
	"errors"
	"testing"
)

func TestStopping(t *testing.T) {
	cause := errors.New("CRI endpoint does not answer: rpc error: code = Canceled")
	if err := stopping(context.Background(), cause); err != cause {
		t.Errorf("with ctx alive: %v, want the error itself", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := stopping(ctx, cause)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("with ctx done: %v, want it and context.Canceled", err)
	}
	if got := stopping(ctx, nil); got != nil {
		t.Errorf("no error: %v", got)
	}
	if got := stopping(ctx, context.Canceled); got != context.Canceled {
		t.Errorf("ctx's own error: %v", got)
	}
}
